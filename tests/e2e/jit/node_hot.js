// A hot JS function for the Node.js JIT test (node_jit_test.py): `driver` calls
// `hot` in a loop; once both are optimized and their jitdump records are on disk, print
// "ready PID" and keep calling them until killed.
const fs = require("fs");
const dump = `jit-${process.pid}.dump`;
function hot(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s = (s + i * 7) % 1000003;
  return s;
}
function driver() {
  let t = 0;
  for (let k = 0; k < 5; k++) t += hot(200);  // returns often: its caller shows in a 3 s trace
  return t;
}
const size = () => { try { return fs.statSync(dump).size; } catch { return 0; } };
let sum = 0;
const start = Date.now();
while (Date.now() - start < 1500) sum += driver();  // warm: V8 optimizes hot and driver
// V8 writes the jitdump through a 2 MB stdio buffer, so its newest records reach the file only
// when the buffer fills. Fresh functions add records until 2.5 MB more are on disk: by then
// every record written during the warm-up is.
const target = size() + 2.5 * 1024 * 1024;
let filler = 0;
while (size() < target) {
  for (let i = 0; i < 100; i++) sum += new Function("x", `return x + ${filler++};`)(i);
  if (Date.now() - start > 60000) { console.log(`timeout: ${dump} stays at ${size()} bytes`); process.exit(1); }
}
console.log(`ready ${process.pid} ${filler} ${sum > 0}`);
for (;;) sum += driver();
