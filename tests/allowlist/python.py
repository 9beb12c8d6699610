# python's normal work: files, subprocesses, threads, asyncio, sqlite,
# TLS setup, hashing, archives, fork, mmap, locks, a TCP server and client
# on granted ports.
import asyncio, fcntl, hashlib, json, mmap, os, shutil, signal, socket
import sqlite3, ssl, subprocess, sys, tempfile, threading, time, zipfile
import concurrent.futures

d = os.path.join(sys.argv[1], "py")
port = int(sys.argv[2])
os.makedirs(os.path.join(d, "a/b"), exist_ok=True)
with open(os.path.join(d, "a/b/f.json"), "w") as f:
    json.dump({"k": list(range(100))}, f)
shutil.copytree(os.path.join(d, "a"), os.path.join(d, "c"))
list(os.scandir(d)); os.stat(d); os.chmod(os.path.join(d, "c"), 0o755)
with zipfile.ZipFile(os.path.join(d, "z.zip"), "w") as z:
    z.write(os.path.join(d, "a/b/f.json"), "f.json")
hashlib.sha256(b"x").hexdigest()
with tempfile.NamedTemporaryFile() as t:
    t.write(b"x"); t.flush()
db = sqlite3.connect(os.path.join(d, "db.sqlite"))
db.execute("create table t (x)"); db.execute("insert into t values (1)"); db.commit()
ssl.create_default_context()
subprocess.run(["ls", d], check=True, capture_output=True)
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    list(ex.map(lambda x: x * x, range(10)))
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
r, w = os.pipe(); os.write(w, b"x"); os.read(r, 1)
with open(os.path.join(d, "lock"), "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX); fcntl.flock(f, fcntl.LOCK_UN)
with open(os.path.join(d, "m"), "wb") as f:
    f.write(b"\0" * 4096)
with open(os.path.join(d, "m"), "r+b") as f:
    m = mmap.mmap(f.fileno(), 4096); m[0:1] = b"y"; m.close()
signal.signal(signal.SIGUSR1, lambda *a: None); os.kill(os.getpid(), signal.SIGUSR1)
time.sleep(0.01)

async def aio():
    p = await asyncio.create_subprocess_exec("echo", "hi", stdout=asyncio.subprocess.PIPE)
    await p.communicate()
    async def handle(r, w):
        w.write(b"pong"); await w.drain(); w.close()
    srv = await asyncio.start_server(handle, "127.0.0.1", port)
    r, w = await asyncio.open_connection("127.0.0.1", port)
    assert await r.read() == b"pong"
    w.close(); srv.close(); await srv.wait_closed()
asyncio.run(aio())
socket.getaddrinfo("localhost", 80)
print("done")
