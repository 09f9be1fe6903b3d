import json, subprocess, os, sys, select, time
env = {"PATH":os.path.dirname(os.path.realpath("/usr/bin/node"))+":/usr/bin:/bin","HOME":os.path.abspath("home"),
       "GEMINI_API_KEY":"stub-key","GOOGLE_GEMINI_BASE_URL":"http://127.0.0.1:18765"}
g = os.path.expanduser("~/.cache/proctor-ci/npm/node_modules/.bin/gemini")
p = subprocess.Popen([g,"--acp"],stdin=subprocess.PIPE,stdout=subprocess.PIPE,stderr=open("gem.err","wb"),env=env,cwd="ws")
def send(m): p.stdin.write((json.dumps(m)+"\n").encode()); p.stdin.flush()
def wait(i, t=150):
    end=time.time()+t
    while time.time()<end:
        r,_,_=select.select([p.stdout],[],[],1)
        if not r: continue
        l=p.stdout.readline()
        if not l: return None
        v=json.loads(l)
        if v.get("method")=="session/request_permission":
            send({"jsonrpc":"2.0","id":v["id"],"result":{"outcome":{"outcome":"selected","optionId":[o["optionId"] for o in v["params"]["options"] if o["optionId"]=="proceed_once"][0]}}})
        print("<", json.dumps(v)[:200])
        if v.get("id")==i and "method" not in v: return v
send({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}); wait(0)
send({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":os.path.abspath("ws"),"mcpServers":[]}}); r=wait(1)
sid=r["result"]["sessionId"]; open("sid","w").write(sid)
send({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":sid,"prompt":[{"type":"text","text":"first words\nsecond line"}]}}); wait(2)
send({"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":sid,"prompt":[{"type":"text","text":"please list the folder"}]}}); wait(3)
for i,t in enumerate(["write a file", "edit it", "run a command"]):
    send({"jsonrpc":"2.0","id":4+i,"method":"session/prompt","params":{"sessionId":sid,"prompt":[{"type":"text","text":t}]}}); wait(4+i)
p.stdin.close(); p.wait(timeout=30)
