import http.server, json, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        open('/tmp/rec-claude-pty/req.log','a').write(f"GET {self.path}\n")
        self.send_response(200); self.send_header('content-type','application/json'); self.end_headers(); self.wfile.write(b'{}')
    def do_HEAD(self):
        self.send_response(200); self.end_headers()
    def do_POST(self):
        n=int(self.headers.get('content-length',0)); body=self.rfile.read(n)
        open('/tmp/rec-claude-pty/req.log','a').write(f"POST {self.path} {body[:200]!r}\n")
        reset=int(time.time())+3600
        self.send_response(429)
        self.send_header('content-type','application/json')
        self.send_header('anthropic-ratelimit-unified-status','rejected')
        self.send_header('anthropic-ratelimit-unified-reset',str(reset))
        self.send_header('anthropic-ratelimit-unified-5h-status','rejected')
        self.send_header('anthropic-ratelimit-unified-5h-reset',str(reset))
        self.send_header('anthropic-ratelimit-unified-representative-claim','five_hour')
        self.send_header('retry-after','3600')
        self.end_headers()
        self.wfile.write(json.dumps({"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}).encode())
http.server.ThreadingHTTPServer(('127.0.0.1', 18777), H).serve_forever()
