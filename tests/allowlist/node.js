// node's normal work: files, streams, watches, child processes, workers,
// crypto, zlib, timers, DNS, a TCP server and client on granted ports.
const fs = require('fs');
const path = require('path');
const cp = require('child_process');
const os = require('os');
const crypto = require('crypto');
const zlib = require('zlib');
const net = require('net');
const dns = require('dns');
const { Worker } = require('worker_threads');

async function main() {
  const [dir, port] = [process.argv[2], Number(process.argv[3])];
  const d = path.join(dir, 'node');
  fs.mkdirSync(path.join(d, 'a/b'), { recursive: true });
  fs.writeFileSync(path.join(d, 'a/b/f.txt'), 'x'.repeat(10000));
  await fs.promises.appendFile(path.join(d, 'a/b/f.txt'), 'y');
  fs.readdirSync(d, { recursive: true });
  fs.copyFileSync(path.join(d, 'a/b/f.txt'), path.join(d, 'copy.txt'));
  fs.renameSync(path.join(d, 'copy.txt'), path.join(d, 'moved.txt'));
  fs.symlinkSync('moved.txt', path.join(d, 'link'));
  fs.statSync(path.join(d, 'link')); fs.lstatSync(path.join(d, 'link'));
  fs.chmodSync(path.join(d, 'moved.txt'), 0o644);
  fs.mkdtempSync(path.join(os.tmpdir(), 'w-'));
  await new Promise((res) => {
    const w = fs.watch(d, () => { w.close(); res(); });
    setTimeout(() => fs.writeFileSync(path.join(d, 'watched'), '1'), 50);
  });
  await new Promise((res, rej) => fs.createReadStream(path.join(d, 'a/b/f.txt'))
    .pipe(zlib.createGzip()).pipe(fs.createWriteStream(path.join(d, 'f.gz')))
    .on('finish', res).on('error', rej));
  zlib.gunzipSync(fs.readFileSync(path.join(d, 'f.gz')));
  crypto.randomBytes(32); crypto.createHash('sha256').update('x').digest('hex');
  crypto.generateKeyPairSync('ed25519');
  cp.execFileSync('ls', [d]);
  await new Promise((res) => cp.spawn('sh', ['-c', 'echo hi; exit 0'], { stdio: 'pipe' }).on('close', res));
  await new Promise((res) => {
    const w = new Worker('require("worker_threads").parentPort.postMessage(6 * 7)', { eval: true });
    w.on('message', res);
  });
  os.networkInterfaces(); os.cpus(); os.userInfo(); os.loadavg();
  await dns.promises.lookup('localhost');
  await new Promise((res) => setImmediate(res));
  await new Promise((res, rej) => {
    const srv = net.createServer((c) => { c.end('pong'); });
    srv.listen(port, '127.0.0.1', () => {
      const c = net.connect(port, '127.0.0.1');
      let got = '';
      c.on('data', (b) => { got += b; });
      c.on('end', () => { srv.close(); got === 'pong' ? res() : rej(new Error(got)); });
      c.on('error', rej);
    });
  });
  console.log('done');
}
main().catch((e) => { console.error(e); process.exit(1); });
