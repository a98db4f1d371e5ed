// A hot JS function for the Node.js JIT test (node_jit_test.py): `run` calls `driver`, which
// calls `hot`; once all three are optimized and their jitdump records are on disk, it prints
// "ready PID" and goes on exactly as during the warm-up (no new code: anything compiled later
// would sit in V8's buffer, without bytes in the jitdump), until killed.
const fs = require("fs");
const dump = `jit-${process.pid}.dump`;
function hot(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s = (s + i * 7) % 1000003;
  return s;
}
function driver() {
  let t = 0;
  for (let k = 0; k < 5; k++) t += hot(200);  // returns often: its caller shows in a short trace
  return t;
}
let sum = 0;
function run(ms) {  // driver for `ms` milliseconds; called from few-iteration loops only, so
  const end = Date.now() + ms;  // the top-level code is never optimized (new code)
  while (Date.now() < end) for (let k = 0; k < 20; k++) sum += driver();
}
const size = () => { try { return fs.statSync(dump).size; } catch { return 0; } };
const start = Date.now();
while (Date.now() - start < 2000) run(50);  // warm: V8 optimizes hot, driver and run
// V8 writes the jitdump through a 2 MB stdio buffer, so its newest records reach the file only
// when the buffer fills. Fresh functions add records until 2.5 MB more are on disk: by then
// every record written during the warm-up is.
const target = size() + 2.5 * 1024 * 1024;
let filler = 0;
while (size() < target) {
  for (let i = 0; i < 100; i++) sum += new Function("x", `return x + ${filler++};`)(i);
  if (Date.now() - start > 60000) {
    console.log(`timeout: ${dump} stays at ${size()} bytes`);
    process.exit(1);
  }
}
console.log(`ready ${process.pid} ${filler} ${sum > 0}`);
for (;;) run(50);
