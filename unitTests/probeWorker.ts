// A stand-in Harper worker for the thread-probe tests: serves probes for its index and keeps busy in a named function.
import { parentPort } from 'node:worker_threads';
import { serveThreadProbes } from '../agent/threadProbe.js';

serveThreadProbes();
function busyLoopInWorker(): number {
  const end = Date.now() + 15;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1);
  return x;
}
const timer = setInterval(busyLoopInWorker, 20);
parentPort!.on('message', (m) => {
  if (m === 'stop') {
    clearInterval(timer);
    parentPort!.close();
  }
});
parentPort!.postMessage('ready');
