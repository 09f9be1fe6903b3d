# Drives claude's interactive form through a PTY, as recorded in README.md (claude-2.1.332-pty-*).
# Setup: /tmp/rec-claude-pty/{home,ws}; home/.claude.json =
#   {"hasCompletedOnboarding": true, "theme": "dark",
#    "customApiKeyResponses": {"approved": ["<the key's last 20 chars>"], "rejected": []},
#    "projects": {"/tmp/rec-claude-pty/ws": {"hasTrustDialogAccepted": true,
#                                            "hasCompletedProjectOnboarding": true}}}
# /tmp/rec-claude-pty/hook.sh: `cat >> hooks.log; echo >> hooks.log`; claude-api-stub-429.py running.
# Usage: python3 claude-pty-drive.py 'first\r' '/clear' '\r' 'second\r'   (EXTRA="--resume ID" to resume)
import os, pty, sys, time, select, json
settings=json.dumps({"hooks":{e:[{"hooks":[{"type":"command","command":"/tmp/rec-claude-pty/hook.sh","timeout":10}]}] for e in ["SessionStart","UserPromptSubmit","Stop","StopFailure","Notification"]}})
env=dict(os.environ)
env.update(HOME="/tmp/rec-claude-pty/home", ANTHROPIC_API_KEY="sk-ant-api03-dummy", ANTHROPIC_BASE_URL="http://127.0.0.1:18777", TERM="xterm-256color", DISABLE_AUTOUPDATER="1")
claude=os.path.expanduser("~/.cache/proctor-ci/npm/node_modules/.bin/claude")
pid, fd = pty.fork()
if pid == 0:
    os.chdir("/tmp/rec-claude-pty/ws")
    os.execve(claude, [claude, "--settings", settings] + os.environ.get("EXTRA","").split(), env)
out=b""
def pump(t):
    global out
    end=time.time()+t
    while time.time()<end:
        r,_,_=select.select([fd],[],[],0.2)
        if r:
            try: d=os.read(fd,65536)
            except OSError: return False
            if not d: return False
            out+=d
    return True
alive=pump(8)
steps=sys.argv[1:]
for s in steps:
    if not alive: break
    k=s.encode().decode('unicode_escape').encode()
    os.write(fd,k); alive=pump(4)
open("/tmp/rec-claude-pty/screen.bin","wb").write(out)
try: os.kill(pid,9)
except: pass
