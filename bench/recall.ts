// `npm run bench:recall`: what recall adds to a prompt with 1,000 notes stored (agent/memory/memory.ts): the time to
// choose a prompt's notes from the index (each of the scripted set's ten prompts, many times; median and 95th
// percentile), the index's first load, and how many prompts recalled their known note. Writes the `recall` section
// of BENCHMARKS.md.
import path from 'node:path';
import { replaceSection } from './benchmarksFile.js';
import { KNOWN, scriptedMemory } from '../unitTests/recallSet.js';

const BUDGET = 2048;
const ROUNDS = 200;
const now = () => Number(process.hrtime.bigint()) / 1e6;

async function main() {
  const { memory, ids } = await scriptedMemory();
  const t0 = now();
  const first = await memory.recall(KNOWN[0]!.prompt, BUDGET);
  const loadMs = now() - t0;
  let hits = 0;
  for (let i = 0; i < KNOWN.length; i++) if ((await memory.recall(KNOWN[i]!.prompt, BUDGET))?.notes.includes(ids[i]!)) hits++;
  const times: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (const k of KNOWN) {
      const t = now();
      await memory.recall(k.prompt, BUDGET);
      times.push(now() - t);
    }
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(times.length * q))]!;
  const rows = [
    '| what | figure | target |',
    '| --- | --- | --- |',
    `| recall, one prompt, 1,000 notes (median of ${times.length}) | ${at(0.5).toFixed(2)} ms | under 20 ms |`,
    `| recall, 95th percentile | ${at(0.95).toFixed(2)} ms | under 20 ms |`,
    `| the index's first load (1,000 notes, then the first recall) | ${loadMs.toFixed(1)} ms | once per worker thread |`,
    `| prompts that recalled their known note | ${hits} of 10 | at least 9 |`,
    `| bytes recalled for the first prompt (budget ${BUDGET}) | ${Buffer.byteLength(first?.text ?? '')} | at most ${BUDGET} |`,
  ];
  console.log(rows.join('\n'));
  replaceSection(path.join(process.cwd(), 'BENCHMARKS.md'), 'recall', ['## Recall (npm run bench:recall)', '', 'The scripted set of unitTests/recallSet.ts: ten known notes among 990 others, MiniSearch over in-memory tables.', '', ...rows].join('\n'));
  console.log('\nwrote the recall section of BENCHMARKS.md');
}

await main();
