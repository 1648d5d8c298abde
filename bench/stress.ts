// `npm run stress`: the promises a race can break, each tried many times on a real two-node Harper cluster (the packed
// agent deployed on both, as an operator installs it), under CPU load, printing losses and duplicates per scenario.
// A prompt answered 200 must be stored once and answered once; nothing else may be stored; a run must never be left
// running; a delete leaves nothing behind; a follow-up fires once. Not part of `npm test`: it runs for many minutes.
// A run that breaks one keeps its evidence (both nodes' reads of the session, its records, and the store's trace of
// every read and write: agent/trace.ts) under the printed folder. Writes its table into BENCHMARKS.md.
//
//   npm run stress -- [--runs 200] [--only race-one,race-two,cancel,delete,followup] [--parallel 4] [--load 1]
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { bootCluster, eventually, stopCluster, type ClusterNode } from '../integrationTests/cluster.js';
import { FOLLOWUP_PROMPT } from '../integrationTests/providerServer/pager.js';
import { ProviderServer, type Responder } from '../integrationTests/providerServer/server.js';
import { providerSettings } from '../integrationTests/recoveryScenarios.js';
import { replaceSection } from './benchmarksFile.js';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '200' },
    only: { type: 'string' },
    parallel: { type: 'string', default: '4' },
    load: { type: 'string', default: '1' },
    'no-write': { type: 'boolean', default: false },
  },
});
const RUNS = Number(args.runs);
const PARALLEL = Number(args.parallel);
/** How many follow-ups race one restart of the owner's worker threads. */
const FOLLOWUPS_PER_RESTART = 20;
const evidence = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-stress-'));
const traceFile = path.join(evidence, 'trace.jsonl');

/** What one try of a scenario found. */
interface Outcome {
  lost: number;
  duplicated: number;
  /** Anything else the promise forbids (a run left running, records left by a delete), said in words. */
  problems: string[];
  /** The session(s) to keep evidence of when something broke. */
  sessions: string[];
}

interface Scenario {
  name: string;
  what: string;
  /** Once before the tries (config). */
  setup(): Promise<void>;
  /** One try; `i` is its number. */
  attempt(i: number): Promise<Outcome>;
}

let a: ClusterNode;
let b: ClusterNode;
const server = new ProviderServer();

type Op = { status: number; body: any };
const session = async (node: ClusterNode, id: string) => {
  const r = await node.h.op({ operation: 'get_agent_session', session_id: id });
  if (r.status !== 200) throw new Error(`get_agent_session ${id} on ${node.name}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
};
const settled = (node: ClusterNode, id: string, timeoutMs = 60_000) =>
  eventually(async () => {
    const s = await session(node, id);
    if (s.status === 'running') throw new Error(`session ${id} still running on ${node.name} after ${timeoutMs} ms`);
    return s;
  }, timeoutMs, 50);
const prompt = (node: ClusterNode, message: string, session_id?: string): Promise<Op> =>
  node.h.opOnNewConnection({ operation: 'agent_prompt', message, ...(session_id ? { session_id } : {}) });

/** A completed session owned by A, ready to be raced on. */
async function freshSession(): Promise<string> {
  const first = await prompt(a, 'start');
  if (first.status !== 200) throw new Error(`agent_prompt on ${a.name}: ${first.status} ${JSON.stringify(first.body)}`);
  const id = first.body.session_id as string;
  await settled(a, id);
  // B knows the row (else it answers 404 rather than forwarding).
  await eventually(() => session(b, id), 10_000, 50);
  return id;
}

/** Accepted prompts against what the owner's transcript holds: each accepted one once, with an answer after it; no
 * other. A miss is looked for again in the raw records, to tell a prompt never stored from a read that missed it. */
async function checkTranscript(id: string, accepted: string[], sent: string[]): Promise<Outcome> {
  const done = await settled(a, id);
  const out: Outcome = { lost: 0, duplicated: 0, problems: [], sessions: [id] };
  if (done.status !== 'completed') out.problems.push(`ended ${done.status}: ${done.lastError}`);
  const prompts = done.messages.filter((m: any) => m.role === 'user').map((m: any) => m.content as string);
  for (const p of accepted) {
    const n = prompts.filter((x: string) => x === p).length;
    if (n === 0) {
      const raw = await a.h.row(id);
      const stored = raw.messages.some((m: any) => m.role === 'user' && m.content === p);
      out.lost++;
      out.problems.push(`"${p}" accepted (200) but not in get_agent_session on ${a.name} (${stored ? 'its record is in the table: the read missed it' : 'no record of it in the table'})`);
    } else if (n > 1) {
      out.duplicated++;
      out.problems.push(`"${p}" stored ${n} times`);
    } else {
      const at = done.messages.findIndex((m: any) => m.role === 'user' && m.content === p);
      if (!done.messages.slice(at + 1).some((m: any) => m.role === 'assistant' && !m.toolCalls?.length)) out.problems.push(`"${p}" has no answer after it`);
    }
  }
  for (const p of sent) if (!accepted.includes(p) && prompts.includes(p)) {
    out.duplicated++;
    out.problems.push(`"${p}" was refused but is stored`);
  }
  if (done.messageCount !== done.messages.length) out.problems.push(`messageCount ${done.messageCount} but ${done.messages.length} messages`);
  return out;
}

function countLost(out: Outcome, message: string) {
  out.lost++;
  out.problems.push(`"${message}" accepted (200) but not in the session`);
}

function countDuplicated(out: Outcome, message: string, times: number) {
  out.duplicated++;
  out.problems.push(`"${message}" stored ${times} times`);
}

/** `count` prompts at once on one session, each on a connection of its own (so every worker thread takes some), sent to
 * the nodes `to` picks. */
async function race(i: number, count: number, to: (k: number) => ClusterNode): Promise<Outcome> {
  const id = await freshSession();
  const sent = Array.from({ length: count }, (_, k) => `race ${i}.${k}`);
  const answers = await Promise.all(sent.map((message, k) => prompt(to(k), message, id).then((r) => ({ message, ...r }))));
  const problems: string[] = [];
  for (const r of answers) if (r.status !== 200 && r.status !== 409) problems.push(`"${r.message}" answered ${r.status}: ${JSON.stringify(r.body)}`);
  const out = await checkTranscript(id, answers.filter((r) => r.status === 200).map((r) => r.message), sent);
  out.problems.push(...problems);
  return out;
}

const scenarios: Scenario[] = [
  {
    name: 'race-one',
    what: '10 prompts at once on one session, all to its owner (two worker threads)',
    setup: () => useProvider('local'),
    attempt: (i) => race(i, 10, () => a),
  },
  {
    name: 'race-two',
    what: '20 prompts at once on one session, 10 to each node (B forwards to the owner)',
    setup: () => useProvider('local'),
    attempt: (i) => race(i, 20, (k) => (k % 2 ? b : a)),
  },
  {
    name: 'cancel',
    what: 'a prompt and cancel_agent_run at once on an idle session, each to either node',
    setup: () => useProvider('local'),
    attempt: cancelRace,
  },
  {
    name: 'delete',
    what: 'a prompt and delete_agent_session at once on an idle session, each to either node',
    setup: () => useProvider('local'),
    attempt: deleteRace,
  },
  {
    name: 'followup',
    what: `follow-ups falling due around a restart of the owner's worker threads (${FOLLOWUPS_PER_RESTART} a restart)`,
    setup: () => useProvider('openai'),
    attempt: followupRace,
  },
];

/** A prompt and a cancel at once on an idle session: the run either completes (the cancel answers 409) or is cancelled
 * (200: the session ends aborted with no answer after the prompt, whatever the run was doing). Never left running. */
async function cancelRace(i: number): Promise<Outcome> {
  const id = await freshSession();
  const message = `cancel ${i}`;
  const [prompted, cancelled] = await Promise.all([prompt(i % 2 ? b : a, message, id), (i % 4 < 2 ? a : b).h.opOnNewConnection({ operation: 'cancel_agent_run', session_id: id })]);
  const out: Outcome = { lost: 0, duplicated: 0, problems: [], sessions: [id] };
  if (prompted.status !== 200) out.problems.push(`the prompt answered ${prompted.status}: ${JSON.stringify(prompted.body)}`);
  if (cancelled.status !== 200 && cancelled.status !== 409) out.problems.push(`the cancel answered ${cancelled.status}: ${JSON.stringify(cancelled.body)}`);
  const done = await settled(a, id);
  const prompts = done.messages.filter((m: any) => m.role === 'user' && m.content === message).length;
  if (prompted.status === 200 && prompts === 0) countLost(out, message);
  if (prompts > 1) countDuplicated(out, message, prompts);
  const at = done.messages.findIndex((m: any) => m.role === 'user' && m.content === message);
  const answered = at >= 0 && done.messages.slice(at + 1).some((m: any) => m.role === 'assistant' && !m.toolCalls?.length);
  if (cancelled.status === 200 && (done.status !== 'aborted' || answered)) out.problems.push(`cancelled (200) but the session ended ${done.status}${answered ? ' with an answer' : ''}`);
  if (cancelled.status === 409 && (done.status !== 'completed' || !answered)) out.problems.push(`the cancel found no run (409) but the session ended ${done.status}${answered ? '' : ' without an answer'}`);
  return out;
}

/** A prompt and a delete at once on an idle session, sent to either node: the delete wins (the session and every record
 * of it gone from both nodes) or finds the run (409, and the prompt is stored and answered). */
async function deleteRace(i: number): Promise<Outcome> {
  const id = await freshSession();
  const message = `delete ${i}`;
  const [prompted, deleted] = await Promise.all([prompt(i % 2 ? b : a, message, id), (i % 4 < 2 ? b : a).h.opOnNewConnection({ operation: 'delete_agent_session', session_id: id })]);
  const out: Outcome = { lost: 0, duplicated: 0, problems: [], sessions: [id] };
  if (![200, 404, 409].includes(prompted.status)) out.problems.push(`the prompt answered ${prompted.status}: ${JSON.stringify(prompted.body)}`);
  if (deleted.status === 200) {
    for (const node of [a, b]) {
      await eventually(async () => {
        const gone = await node.h.op({ operation: 'get_agent_session', session_id: id });
        const records = await node.h.op({ operation: 'search_by_value', database: 'agent', table: 'AgentMessage', search_attribute: 'session_id', search_value: id, get_attributes: ['id'] });
        if (gone.status !== 404 || records.body.length) throw new Error(`deleted (200), but ${node.name} still answers ${gone.status} and holds ${records.body.length} message record(s)`);
      }, 10_000, 100).catch((error) => out.problems.push((error as Error).message));
    }
    return out;
  }
  if (deleted.status !== 409) out.problems.push(`the delete answered ${deleted.status}: ${JSON.stringify(deleted.body)}`);
  if (prompted.status !== 200) return out;
  const done = await settled(a, id);
  const prompts = done.messages.filter((m: any) => m.role === 'user' && m.content === message).length;
  if (prompts === 0) countLost(out, message);
  if (prompts > 1) countDuplicated(out, message, prompts);
  if (done.status !== 'completed') out.problems.push(`ended ${done.status}: ${done.lastError}`);
  return out;
}

/** Follow-ups falling due around a restart of the owner's worker threads (restart_service http_workers), their due
 * times spread over the restart: each fires once after all (its prompt stored once, in its session, the row fired).
 * `i` counts follow-ups; the first of each group of FOLLOWUPS_PER_RESTART schedules the group and restarts. */
const followupGroups = new Map<number, Promise<Outcome[]>>();
function followupRace(i: number): Promise<Outcome> {
  const group = Math.floor(i / FOLLOWUPS_PER_RESTART);
  if (!followupGroups.has(group)) followupGroups.set(group, followupGroup(group));
  return followupGroups.get(group)!.then((outcomes) => outcomes[i % FOLLOWUPS_PER_RESTART]!);
}

async function followupGroup(group: number): Promise<Outcome[]> {
  // One group at a time: the restart of one must not cut another's.
  await followupGroups.get(group - 1)?.catch(() => undefined);
  const scheduled = await Promise.all(
    Array.from({ length: FOLLOWUPS_PER_RESTART }, async (_, k) => {
      const message = `followup ${group}.${k}`;
      // Due 1 to 3 s from now: some before the restart, some during it, some after.
      const r = await prompt(a, `come back in ${1 + (k % 3)} s: ${message}`);
      if (r.status !== 200) throw new Error(`agent_prompt: ${r.status} ${JSON.stringify(r.body)}`);
      return { id: r.body.session_id as string, message };
    })
  );
  await new Promise((r) => setTimeout(r, 1_500));
  const restart = await a.h.op({ operation: 'restart_service', service: 'http_workers' });
  if (restart.status !== 200) throw new Error(`restart_service: ${restart.status} ${JSON.stringify(restart.body)}`);
  return Promise.all(
    scheduled.map(async ({ id, message }) => {
      const out: Outcome = { lost: 0, duplicated: 0, problems: [], sessions: [id] };
      const fired = await eventually(async () => {
        const list = await a.h.op({ operation: 'list_agent_followups', session_id: id });
        if (list.status !== 200) throw new Error(`list_agent_followups: ${list.status}`);
        const f = list.body.followups[0];
        if (!f || f.status === 'pending') throw new Error(`follow-up of ${id} still ${f?.status ?? 'not scheduled'} 90 s after the restart`);
        const s = await session(a, id);
        if (s.status === 'running') throw new Error(`session ${id} still running 90 s after the restart`);
        return { f, s };
      }, 90_000, 250).catch((error) => {
        out.problems.push((error as Error).message);
        return undefined;
      });
      if (!fired) {
        out.lost++;
        return out;
      }
      const prompts = fired.s.messages.filter((m: any) => m.role === 'user' && m.followup === fired.f.followup_id).length;
      if (fired.f.status !== 'fired') out.problems.push(`follow-up ${fired.f.followup_id} ended ${fired.f.status} (${fired.f.cancelReason})`);
      if (prompts === 0) {
        out.lost++;
        out.problems.push(`follow-up ${fired.f.followup_id} is ${fired.f.status}, but its prompt is not in session ${id} (${fired.s.status}: ${fired.s.lastError})`);
      }
      if (prompts > 1) {
        out.duplicated++;
        out.problems.push(`follow-up ${fired.f.followup_id} fired ${prompts} times`);
      }
      const answered = fired.s.messages.some((m: any) => m.role === 'assistant' && m.content === `followed up: ${message}`);
      if (prompts === 1 && !answered) out.problems.push(`follow-up of ${id} fired but not answered: the session ended ${fired.s.status} (${fired.s.lastError})`);
      return out;
    })
  );
}

async function useProvider(provider: 'local' | 'openai') {
  const change = provider === 'local' ? { provider: 'local', baseUrl: null, apiKey: null, model: null } : { ...providerSettings('openai', server), followupMinSeconds: 1 };
  const set = await a.h.setConfig(change);
  if (set.status !== 200) throw new Error(`set_agent_config: ${set.status} ${JSON.stringify(set.body)}`);
  for (const node of [a, b]) {
    await eventually(async () => {
      for (const status of (await node.h.statusPerThread(2)).values()) if (status.config.provider !== provider) throw new Error(`${node.name} not on ${provider} yet`);
    });
  }
}

/** Keeps what each node read and wrote of the sessions of a try that broke a promise. */
async function keepEvidence(name: string, i: number, out: Outcome) {
  const dir = path.join(evidence, `${name}-${i}`);
  mkdirSync(dir, { recursive: true });
  for (const id of out.sessions) {
    const views: Record<string, unknown> = {};
    for (const node of [a, b]) {
      views[node.name] = { session: await node.h.op({ operation: 'get_agent_session', session_id: id }), row: await node.h.row(id).catch(String) };
    }
    const traced = readFileSync(traceFile, 'utf8').split('\n').filter((l) => l.includes(id));
    writeFileSync(path.join(dir, `${id}.json`), JSON.stringify({ problems: out.problems, views }, null, 1));
    writeFileSync(path.join(dir, `${id}.trace.jsonl`), traced.join('\n') + '\n');
  }
  return dir;
}

/** Busy processes: the other test lane this machine's CI runs beside the cluster. */
function cpuLoad(n: number): ChildProcess[] {
  return Array.from({ length: n }, () => fork('-e', [], { execArgv: ['-e', 'for(;;){}'], stdio: 'ignore' }));
}

interface Tally {
  name: string;
  what: string;
  runs: number;
  lost: number;
  duplicated: number;
  problems: number;
  /** Row writes Harper dropped (the trace's read-back found another write in their place). */
  dropped: number;
  seconds: number;
}

/** How many row writes the trace has seen Harper drop so far. */
const droppedSoFar = () => (existsSync(traceFile) ? readFileSync(traceFile, 'utf8').split('\n').filter((l) => l.includes('"op":"dropped"')).length : 0);

async function main() {
  const chosen = args.only ? scenarios.filter((s) => args.only!.split(',').includes(s.name)) : scenarios;
  console.log(`stress: ${chosen.map((s) => s.name).join(', ')}; ${RUNS} tries each, ${PARALLEL} at once, ${args.load} busy process(es); evidence in ${evidence}`);
  await server.start();
  server.responder = stressResponder();
  const nodes = await bootCluster(2, { AGENT_TRACE_FILE: traceFile });
  [a, b] = nodes as [ClusterNode, ClusterNode];
  const load = cpuLoad(Number(args.load));
  const tallies: Tally[] = [];
  try {
    for (const s of chosen) {
      await s.setup();
      const tally: Tally = { name: s.name, what: s.what, runs: 0, lost: 0, duplicated: 0, problems: 0, dropped: 0, seconds: 0 };
      const started = Date.now();
      const droppedBefore = droppedSoFar();
      let next = 0;
      await Promise.all(
        Array.from({ length: PARALLEL }, async () => {
          for (let i = next++; i < RUNS; i = next++) {
            const out = await s.attempt(i).catch((error): Outcome => ({ lost: 0, duplicated: 0, problems: [`failed: ${(error as Error).message}`], sessions: [] }));
            tally.runs++;
            tally.lost += out.lost;
            tally.duplicated += out.duplicated;
            if (out.problems.length) {
              tally.problems++;
              const dir = await keepEvidence(s.name, i, out).catch((e) => `(evidence not kept: ${e})`);
              console.log(`  ${s.name} #${i}: ${out.problems.join('; ')} -> ${dir}`);
            }
            if (tally.runs % 25 === 0) console.log(`  ${s.name}: ${tally.runs}/${RUNS} (lost ${tally.lost}, duplicated ${tally.duplicated}, broken tries ${tally.problems})`);
          }
        })
      );
      tally.seconds = (Date.now() - started) / 1000;
      tally.dropped = droppedSoFar() - droppedBefore;
      tallies.push(tally);
      console.log(`${s.name}: ${tally.runs} tries in ${tally.seconds.toFixed(0)} s: lost ${tally.lost}, duplicated ${tally.duplicated}, tries with any problem ${tally.problems}, row writes dropped ${tally.dropped}`);
    }
  } finally {
    load.forEach((p) => p.kill('SIGKILL'));
    await stopCluster(nodes);
    await server.close();
  }
  const table = [
    `Generated by \`npm run stress\` (bench/stress.ts) on ${new Date().toISOString().slice(0, 10)}: a two-node Harper 4.7.29 cluster on this machine (${os.cpus().length} cores), the packed agent deployed on both, ${PARALLEL} tries at once and ${args.load} busy process(es) beside them.`,
    '',
    '| scenario | tries | prompts lost | duplicated | tries with any problem | row writes Harper dropped | time |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...tallies.map((t) => `| ${t.name}: ${t.what} | ${t.runs} | ${t.lost} | ${t.duplicated} | ${t.problems} | ${t.dropped} | ${t.seconds.toFixed(0)} s |`),
  ].join('\n');
  console.log('\n' + table);
  if (!args['no-write'] && !args.only) replaceSection(path.join(process.cwd(), 'BENCHMARKS.md'), 'stress', '## Races (npm run stress)\n\n' + table);
  if (tallies.some((t) => t.lost || t.duplicated || t.problems || t.dropped)) process.exitCode = 1;
}

/** Answers a prompt at once; a follow-up's prompt with what it asked; "come back in N s: …" with a schedule_followup. */
function stressResponder(): Responder {
  return (req) => {
    const last = req.messages.at(-1)!;
    if (last.role === 'tool') return { text: 'scheduled' };
    const followup = FOLLOWUP_PROMPT.exec(last.text);
    if (followup) return { text: `followed up: ${followup[1]}` };
    const ask = /^come back in (\d+) s: (.*)$/.exec(last.text);
    if (ask) return { toolCalls: [{ name: 'schedule_followup', arguments: { delaySeconds: Number(ask[1]), message: ask[2] } }] };
    return { text: `answer: ${last.text}` };
  };
}

await main();
