// Runs one grep_files search off the main thread, so the run can stop a pattern that backtracks for ever.
import { parentPort, workerData } from 'node:worker_threads';
import { errorInfo } from '../../resources/models/agentLoop.js';
import { grepSearch, type GrepJob } from './grepSearch.js';

grepSearch(workerData as GrepJob).then(
  (result) => parentPort!.postMessage({ ok: true, result }),
  (error) => parentPort!.postMessage({ ok: false, error: errorInfo(error) })
);
