import json, sys, threading
from http.server import BaseHTTPRequestHandler, HTTPServer
calls = []
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): sys.stderr.write("REQ %s %s\n" % (self.command, self.path))
    def do_POST(self):
        n = int(self.headers.get("content-length", 0)); body = self.rfile.read(n)
        open("reqs.log","ab").write(self.path.encode()+b"\n"+body[:3000]+b"\n\n")
        if "countTokens" in self.path:
            out = json.dumps({"totalTokens": 10}).encode()
            self.send_response(200); self.send_header("content-type","application/json"); self.send_header("content-length",str(len(out))); self.end_headers(); self.wfile.write(out); return
        req = json.loads(body or b"{}")
        contents = req.get("contents", [])
        last = contents[-1] if contents else {}
        has_resp = any("functionResponse" in p for p in last.get("parts", []))
        text_all = json.dumps(contents)
        lasttext = json.dumps(last)
        if ":generateContent" in self.path:
            parts = [{"text": json.dumps({"complexity_reasoning": "stub", "complexity_score": 10})}]
        elif has_resp:
            parts = [{"text": "stub answer: done"}]
        elif "list the folder" in lasttext:
            parts = [{"functionCall": {"name": "list_directory", "args": {"dir_path": "."}}}]
        elif "write a file" in lasttext:
            parts = [{"functionCall": {"name": "write_file", "args": {"file_path": "new.txt", "content": "one\ntwo\n"}}}]
        elif "edit it" in lasttext:
            parts = [{"functionCall": {"name": "replace", "args": {"file_path": "new.txt", "old_string": "two", "new_string": "2\n3", "instruction": "x"}}}]
        elif "run a command" in lasttext:
            parts = [{"functionCall": {"name": "run_shell_command", "args": {"command": "echo hi; exit 3", "description": "say hi"}}}]
        elif "make a plan" in lasttext:
            parts = [{"functionCall": {"name": "write_todos", "args": {"todos": [{"description": "first step", "status": "completed"}, {"description": "second step", "status": "in_progress"}]}}}]
        else:
            parts = [{"text": "stub answer: done"}]
        chunk = {"candidates":[{"content":{"role":"model","parts":parts},"finishReason":"STOP","index":0}],
                 "usageMetadata":{"promptTokenCount":1234,"candidatesTokenCount":7,"totalTokenCount":1241,"cachedContentTokenCount":0},
                 "modelVersion":"gemini-stub"}
        if "alt=sse" in self.path:
            out = ("data: " + json.dumps(chunk) + "\r\n\r\n").encode()
            ct = "text/event-stream"
        else:
            out = json.dumps(chunk).encode(); ct = "application/json"
        self.send_response(200); self.send_header("content-type", ct); self.send_header("content-length", str(len(out))); self.end_headers(); self.wfile.write(out)
    do_GET = do_POST
s = HTTPServer(("127.0.0.1", 18765), H)
s.serve_forever()
