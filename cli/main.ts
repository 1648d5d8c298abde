#!/usr/bin/env node
// harper-agent: the agent's command line. Sends the agent's operations to Harper's operations API and follows a
// run live through the session's event stream (agent/sessionFeed.ts), printing each tool call and result size.
import { readFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { messageView, type LiveEvent, type MessageView } from '../agent/sessionFeed.js';
import { AgentClient, CliError, connectionFrom, EXIT } from './client.js';
import { approvalLines, callsTable, compactionLines, configLines, notesTable, previewLines, Progress, runbooksTable, runLines, sessionsTable, transcript, watchesTable, watchLines, type ApprovalView, type WatchView } from './render.js';

const HELP = `harper-agent: talk to the Harper Agent on a Harper instance

usage:
  harper-agent prompt "<message>" [--session ID]   send a prompt, follow the run, print the answer
  harper-agent sessions [--limit N] [--status S] [--owner USER] [--title TEXT] [--cursor C]
                                                   list sessions, newest first, a page at a time
  harper-agent show ID [--full]                    a session's transcript (each message with its size) and model calls
  harper-agent follow ID                           follow a session's run live (one started anywhere: the page, curl)
  harper-agent preview [ID] [--next "<prompt>"]    the request the agent would send next: each part's size, the
                                                   stable prefix a provider's cache can hold, what is cut
  harper-agent compact ID [--focus "<what>"]       replace what the model sees of a session by one summary (the
                                                   messages stay stored), between runs; --focus: what it must keep
  harper-agent cancel ID                           stop a session's run (and its pending follow-ups)
  harper-agent cancel-followup FOLLOWUP            cancel a follow-up the model scheduled
  harper-agent delete ID                           delete a session and everything of it (not while it runs)
  harper-agent export ID [--json]                  the whole session as Markdown (or JSON), for a report:
                                                   harper-agent export ID > incident.md
  harper-agent approve ID APPROVAL [--deny]        answer a pending approval, then follow the run
  harper-agent config [key=value ...]              show agent.* config, or change keys (values as JSON, else text)
  harper-agent notes [--query TEXT]                the agent's notes about this instance (the best matches for TEXT)
  harper-agent note add "<text>" [--scope KIND:NAME] | note edit ID "<text>" | note delete ID
                                                   add, change or delete a note (KIND: component, log, table, database)
  harper-agent runbooks [--tag TAG]                the runbooks the model can search and read
  harper-agent runbook add FILE --title "<title>" [--tags a,b] | runbook delete ID
  harper-agent watches                             list watches: trigger, runs, last report, delivery
  harper-agent watch create '<JSON>'               create a watch: {"name", "trigger", "prompt", "limits", "delivery"}
  harper-agent watch show|pause|resume|delete|test ID
                                                   one watch; pause or resume it; delete it; fire it once now
  harper-agent watch follow ID [--runs N]          follow a watch's runs live as they fire (N runs, else until ^C)

connection:
  --url URL          operations API URL (env HARPER_AGENT_URL; default http://localhost:9925/)
  --user, --password credentials (env HARPER_AGENT_USER, HARPER_AGENT_PASSWORD; or in the URL)
  --json             print the answer as JSON, for scripts
  a session ID may be any unique beginning of one (as the admin page shows them)

exit codes: 0 done, 1 the run ended in error or was cancelled, 2 bad usage, 3 Harper unreachable,
  4 401/403, 5 not found, 6 conflict (409), 7 other rejection, 10 the run waits for an approval`;

interface Output {
  write(s: string): unknown;
  isTTY?: boolean;
}

export interface Io {
  stdout: Output;
  stderr: Output;
  env: NodeJS.ProcessEnv;
}

interface Flags {
  url?: string;
  user?: string;
  password?: string;
  session?: string;
  limit?: string;
  status?: string;
  owner?: string;
  title?: string;
  cursor?: string;
  next?: string;
  focus?: string;
  runs?: string;
  query?: string;
  scope?: string;
  tag?: string;
  tags?: string;
  deny?: boolean;
  json?: boolean;
  full?: boolean;
  help?: boolean;
}

const OPTIONS = {
  url: { type: 'string' },
  user: { type: 'string' },
  password: { type: 'string' },
  session: { type: 'string' },
  limit: { type: 'string' },
  status: { type: 'string' },
  owner: { type: 'string' },
  title: { type: 'string' },
  cursor: { type: 'string' },
  next: { type: 'string' },
  focus: { type: 'string' },
  runs: { type: 'string' },
  query: { type: 'string' },
  scope: { type: 'string' },
  tag: { type: 'string' },
  tags: { type: 'string' },
  deny: { type: 'boolean' },
  json: { type: 'boolean' },
  full: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const ENDED = new Set(['completed', 'error', 'aborted', 'idle', 'awaiting_approval']);

interface RunResult {
  session_id: string;
  status: string;
  answer: string | null;
  /** The answer was printed as the model wrote it (a streamed call): not printed again at the end. */
  answerShown?: boolean;
  lastError: string | null;
  messages: MessageView[];
  pendingApprovals: ApprovalView[];
}

/** A follower reconnects this often, this many times (Harper restarting its threads ends every event stream). */
const RECONNECT_MS = 500;
const RECONNECTS = 60;

/** Follows a run from message `from` until it stops running: prints each tool call and result as it lands. */
async function follow(client: AgentClient, id: string, from: number, io: Io, json: boolean): Promise<RunResult> {
  const progress = new Progress(json ? { write: () => undefined } : io.stderr);
  const seen = new Map<number, MessageView>();
  const result: RunResult = { session_id: id, status: 'running', answer: null, lastError: null, messages: [], pendingApprovals: [] };
  // A streaming call's text is printed as it comes; `writing` is the call being printed, `shown` the messages whose
  // text was printed that way (their stored copy then prints only its tool calls).
  let writing: { call: string; index: number } | undefined;
  const shown = new Set<number>();
  const endLine = () => {
    if (!writing) return;
    io.stdout.write('\n');
    writing = undefined;
    progress.resume();
  };
  try {
    for (let attempt = 0; ; attempt++) {
      const stop = new AbortController();
      let ended = false;
      try {
        for await (const { event, data } of client.events(id, from, stop.signal)) {
          if (event === 'deleted') throw new CliError(EXIT.notFound, `session ${id} was deleted while it ran`);
          if (event === 'live') {
            const e = data as LiveEvent;
            if (json || e.index < from || seen.has(e.index)) continue;
            if (e.kind === 'text') {
              // Joined after the call's first piece: its start is gone (live pieces are never kept), so this call is
              // not printed live; its stored message prints whole.
              if (writing?.call !== e.call && e.at > 0) continue;
              if (writing?.call !== e.call) {
                endLine();
                progress.suspend();
                writing = { call: e.call, index: e.index };
              }
              io.stdout.write(e.text);
              shown.add(e.index);
            } else if (e.kind === 'end' && writing?.call === e.call) {
              endLine();
              if (e.failed) {
                shown.delete(e.index);
                io.stdout.write('  ✗ the model call failed mid-answer: the text above was not kept\n');
              }
            }
            continue;
          }
          if (event !== 'session') continue;
          const lines: string[] = [];
          for (const m of data.messages as MessageView[]) {
            const before = seen.get(m.index);
            if (before && before.bytes === m.bytes && before.cut === m.cut) continue; // sent again after a reconnect
            seen.set(m.index, m);
            if (writing?.index === m.index) endLine();
            lines.push(...runLines(m, before !== undefined, shown.has(m.index)));
          }
          if (!json) progress.print(lines, io.stdout);
          const s = data.session;
          Object.assign(result, { status: s.status, lastError: s.lastError, pendingApprovals: s.pendingApprovals });
          progress.update(s.status, s.messageCount, s.bytes);
          if ((ended = ENDED.has(s.status))) break;
        }
      } catch (error) {
        if (!(error instanceof CliError && error.exitCode === EXIT.unreachable) || attempt >= RECONNECTS) throw error;
      } finally {
        stop.abort();
      }
      if (ended || attempt >= RECONNECTS) break;
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
    }
  } finally {
    endLine();
    progress.stop();
  }
  result.messages = [...seen.values()].sort((a, b) => a.index - b.index);
  const last = result.messages.at(-1);
  result.answer = last?.role === 'assistant' && !last.toolCalls?.length ? last.content : null;
  if (result.answer !== null && shown.has(last!.index)) result.answerShown = true;
  return result;
}

function report(result: RunResult, io: Io, json: boolean): number {
  const code = result.status === 'completed' ? EXIT.ok : result.status === 'awaiting_approval' ? EXIT.awaitingApproval : result.status === 'running' ? EXIT.unreachable : EXIT.runFailed;
  if (json) {
    io.stdout.write(JSON.stringify(result) + '\n');
    return code;
  }
  if (result.answer !== null && !result.answerShown) io.stdout.write(`${result.answer}\n`);
  if (result.status === 'awaiting_approval') for (const p of result.pendingApprovals) io.stdout.write(approvalLines(result.session_id, p).join('\n') + '\n');
  if (result.status === 'error' || result.status === 'aborted') io.stderr.write(`✗ ${result.status}: ${result.lastError ?? 'no reason recorded'}\n`);
  if (result.status === 'running') io.stderr.write(`the event stream ended while session ${result.session_id} was still running: \`harper-agent show ${result.session_id}\`\n`);
  return code;
}

function needs(positionals: string[], count: number, usage: string) {
  if (positionals.length !== count) throw new CliError(EXIT.usage, `usage: harper-agent ${usage}`);
}

/** key=value pairs as a set_agent_config change: JSON values (numbers, booleans) where they parse, text otherwise. */
export function parseAssignments(pairs: string[]): Record<string, unknown> {
  const change: Record<string, unknown> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new CliError(EXIT.usage, `${JSON.stringify(pair)} is not key=value (e.g. maxToolResultBytes=32768)`);
    const raw = pair.slice(eq + 1);
    let value: unknown = raw;
    try {
      value = JSON.parse(raw);
    } catch {
      // plain text
    }
    change[pair.slice(0, eq)] = value;
  }
  return change;
}

export async function run(argv: string[], io: Io): Promise<number> {
  let parsed: { values: Flags; positionals: string[] };
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true }) as typeof parsed;
  } catch (error) {
    throw new CliError(EXIT.usage, `${(error as Error).message}\n\n${HELP}`);
  }
  const { values: flags, positionals } = parsed;
  const [command, ...args] = positionals;
  if (flags.help || !command || command === 'help') {
    io.stdout.write(HELP + '\n');
    return command || flags.help ? EXIT.ok : EXIT.usage;
  }
  const client = new AgentClient(connectionFrom(flags, io.env));
  const json = flags.json === true;
  // A session id may be a unique beginning of one: the server says which session it names (after the usage checks).
  const resolved = async () => {
    if (SESSION_COMMANDS.has(command) && args[0]) args[0] = await resolveSession(client, args[0]);
    if (flags.session) flags.session = await resolveSession(client, flags.session);
  };
  const print = (text: string, data: unknown) => io.stdout.write((json ? JSON.stringify(data) : text) + '\n');

  switch (command) {
    case 'prompt': {
      needs(args, 1, 'prompt "<message>" [--session ID]');
      await resolved();
      const started = await client.op({ operation: 'agent_prompt', message: args[0], ...(flags.session ? { session_id: flags.session } : {}) });
      if (!json) io.stdout.write(`session ${started.session_id}\n`);
      return report(await follow(client, started.session_id, started.messageIndex ?? 0, io, json), io, json);
    }
    case 'approve': {
      needs(args, 2, 'approve ID APPROVAL [--deny]');
      await resolved();
      const [id, approval] = args as [string, string];
      const resumed = await client.op({ operation: 'approve_agent_action', session_id: id, approval_id: approval, approved: !flags.deny });
      if (!json) io.stdout.write(`${flags.deny ? 'denied' : 'approved'} ${approval}; following session ${id}\n`);
      return report(await follow(client, id, resumed.messageIndex ?? 0, io, json), io, json);
    }
    case 'sessions': {
      needs(args, 0, 'sessions [--limit N] [--status S] [--owner USER] [--title TEXT] [--cursor C]');
      await resolved();
      const limit = flags.limit === undefined ? undefined : Number(flags.limit);
      if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= 1000)) throw new CliError(EXIT.usage, '--limit is a whole number from 1 to 1000');
      // --owner, not --user: --user is whom the CLI connects as.
      const filters = Object.fromEntries(([['status', 'status'], ['owner', 'user'], ['title', 'title'], ['cursor', 'cursor']] as const).filter(([flag]) => typeof flags[flag] === 'string').map(([flag, key]) => [key, flags[flag]]));
      const answer = await client.op({ operation: 'list_agent_sessions', ...(limit ? { limit } : {}), ...filters });
      print(sessionsTable(answer.sessions) + (answer.nextCursor ? `\nmore: harper-agent sessions --cursor ${answer.nextCursor}` : ''), answer);
      return EXIT.ok;
    }
    case 'follow': {
      needs(args, 1, 'follow ID');
      await resolved();
      const s = await client.op({ operation: 'get_agent_session', session_id: args[0] });
      // From the newest prompt: what the run being followed answers.
      const from = Math.max(0, (s.messages as { role: string }[]).map((m) => m.role).lastIndexOf('user'));
      if (!json) io.stdout.write(`following session ${s.session_id} (${s.status})\n`);
      return report(await follow(client, s.session_id, from, io, json), io, json);
    }
    case 'show': {
      needs(args, 1, 'show ID [--full]');
      await resolved();
      const s = await client.op({ operation: 'get_agent_session', session_id: args[0] });
      const messages = (s.messages as Parameters<typeof messageView>[0][]).map(messageView);
      const calls = await client.op({ operation: 'list_agent_model_calls', session_id: args[0] });
      print(`${transcript(s, messages, flags.full === true)}\n${callsTable(calls.calls, calls.totals)}`, { ...s, messages, modelCalls: calls });
      return EXIT.ok;
    }
    case 'delete': {
      needs(args, 1, 'delete ID');
      await resolved();
      const answer = await client.op({ operation: 'delete_agent_session', session_id: args[0] });
      print(`session ${answer.session_id} deleted: ${answer.messages} messages, ${answer.modelCalls} model calls, ${answer.followups} follow-ups`, answer);
      return EXIT.ok;
    }
    case 'export': {
      needs(args, 1, 'export ID [--json]');
      await resolved();
      // Streamed to stdout as it comes: a large session is never held whole.
      await client.stream({ operation: 'export_agent_session', session_id: args[0], format: flags.json === true ? 'json' : 'markdown' }, (chunk) => io.stdout.write(chunk));
      return EXIT.ok;
    }
    case 'cancel-followup': {
      needs(args, 1, 'cancel-followup FOLLOWUP');
      await resolved();
      const answer = await client.op({ operation: 'cancel_agent_followup', followup_id: args[0] });
      print(`follow-up ${answer.followup_id} cancelled (it was due ${new Date(answer.dueAt).toISOString()})`, answer);
      return EXIT.ok;
    }
    case 'preview': {
      if (args.length > 1) throw new CliError(EXIT.usage, 'usage: harper-agent preview [ID] [--next "<prompt>"]');
      await resolved();
      const answer = await client.op({ operation: 'preview_agent_request', ...(args[0] ? { session_id: args[0] } : {}), ...(typeof flags.next === 'string' ? { message: flags.next } : {}) });
      print(previewLines(answer), answer);
      return EXIT.ok;
    }
    case 'compact': {
      needs(args, 1, 'compact ID [--focus "<what>"]');
      await resolved();
      // The operation runs in the background; the CLI waits for the record, as `prompt` waits for the answer.
      const answer = await client.op({ operation: 'compact_agent_session', session_id: args[0], wait: true, ...(typeof flags.focus === 'string' ? { instructions: flags.focus } : {}) });
      const c = answer.compaction as MessageView | null;
      print(c ? `session ${answer.session_id}: ${c.boundary}\n${compactionLines(c).join('\n')}` : `session ${answer.session_id}: ${answer.status}, not compacted${answer.lastError ? `: ${answer.lastError}` : ''}`, answer);
      return c ? EXIT.ok : EXIT.runFailed;
    }
    case 'cancel': {
      needs(args, 1, 'cancel ID');
      await resolved();
      const answer = await client.op({ operation: 'cancel_agent_run', session_id: args[0] });
      print(`session ${answer.session_id}: ${answer.status}`, answer);
      return EXIT.ok;
    }
    case 'config': {
      const config = args.length === 0 ? await client.op({ operation: 'get_agent_config' }) : await client.op({ operation: 'set_agent_config', ...parseAssignments(args) });
      print(configLines(config), config);
      return EXIT.ok;
    }
    case 'notes': {
      needs(args, 0, 'notes [--query TEXT]');
      await resolved();
      const answer = await client.op({ operation: 'list_agent_notes', ...(flags.query ? { query: flags.query } : {}) });
      print(notesTable(answer.notes), answer);
      return EXIT.ok;
    }
    case 'note':
      return noteCommand(client, args, flags, print);
    case 'runbooks': {
      needs(args, 0, 'runbooks [--tag TAG]');
      await resolved();
      const answer = await client.op({ operation: 'list_agent_runbooks', ...(flags.tag ? { tag: flags.tag } : {}) });
      print(runbooksTable(answer.runbooks), answer);
      return EXIT.ok;
    }
    case 'runbook': {
      const [sub, arg] = args;
      if (sub === 'delete' && args.length === 2) {
        const answer = await client.op({ operation: 'delete_agent_runbook', runbook_id: arg });
        print(`runbook ${answer.runbook_id} deleted`, answer);
        return EXIT.ok;
      }
      if (sub !== 'add' || args.length !== 2 || !flags.title) throw new CliError(EXIT.usage, 'usage: harper-agent runbook add FILE --title "<title>" [--tags a,b] | runbook delete ID');
      let body: string;
      try {
        body = readFileSync(arg!, 'utf8');
      } catch (error) {
        throw new CliError(EXIT.usage, `cannot read ${arg}: ${(error as NodeJS.ErrnoException).code ?? error}`);
      }
      const tags = flags.tags ? flags.tags.split(',').map((t) => t.trim()).filter(Boolean) : [];
      const answer = await client.op({ operation: 'add_agent_runbook', title: flags.title, tags, body });
      print(`runbook ${answer.runbook_id} added: "${answer.title}", ${answer.bytes.toLocaleString('en-US')} bytes${tags.length ? `, tags ${tags.join(', ')}` : ''}`, answer);
      return EXIT.ok;
    }
    case 'watches': {
      needs(args, 0, 'watches');
      await resolved();
      const answer = await client.op({ operation: 'list_agent_watches' });
      print(watchesTable(answer.watches), answer);
      return EXIT.ok;
    }
    case 'watch':
      return watchCommand(client, args, flags, io, json, print);
    default:
      throw new CliError(EXIT.usage, `unknown command ${JSON.stringify(command)}\n\n${HELP}`);
  }
}

/** Commands whose first argument is a session id. */
const SESSION_COMMANDS = new Set(['show', 'follow', 'delete', 'export', 'preview', 'compact', 'cancel', 'approve']);

/** The whole id of the session `given` names (itself, or the one session it begins); 404 and 409 say why not. */
async function resolveSession(client: AgentClient, given: string): Promise<string> {
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(given)) return given;
  return ((await client.op({ operation: 'find_agent_session', prefix: given })) as { session_id: string }).session_id;
}

/** `note add|edit|delete`. */
async function noteCommand(client: AgentClient, args: string[], flags: Flags, print: (text: string, data: unknown) => void): Promise<number> {
  const [sub, a, b] = args;
  const usage = 'usage: harper-agent note add "<text>" [--scope KIND:NAME] | note edit ID "<text>" | note delete ID';
  let scope: { kind: string; name: string } | undefined;
  if (flags.scope !== undefined) {
    const at = flags.scope.indexOf(':');
    if (at <= 0) throw new CliError(EXIT.usage, '--scope is KIND:NAME, e.g. component:logspam');
    scope = { kind: flags.scope.slice(0, at), name: flags.scope.slice(at + 1) };
  }
  if (sub === 'add' && args.length === 2) {
    const n = await client.op({ operation: 'add_agent_note', text: a, ...(scope ? { scope } : {}) });
    print(`note ${n.note_id} added`, n);
  } else if (sub === 'edit' && args.length === 3) {
    const n = await client.op({ operation: 'update_agent_note', note_id: a, text: b, ...(scope ? { scope } : {}) });
    print(`note ${n.note_id} changed`, n);
  } else if (sub === 'delete' && args.length === 2) {
    const n = await client.op({ operation: 'delete_agent_note', note_id: a });
    print(`note ${n.note_id} deleted`, n);
  } else throw new CliError(EXIT.usage, usage);
  return EXIT.ok;
}

/** `watch create|show|pause|resume|delete|test|follow`. */
async function watchCommand(client: AgentClient, args: string[], flags: Flags, io: Io, json: boolean, print: (text: string, data: unknown) => void): Promise<number> {
  const [sub, arg] = args;
  const usage = 'watch create \'<JSON>\' | watch show|pause|resume|delete|test|follow ID';
  needs(args, 2, usage);
  switch (sub) {
    case 'create': {
      let definition: Record<string, unknown>;
      try {
        definition = JSON.parse(arg!);
      } catch (error) {
        throw new CliError(EXIT.usage, `watch create takes the watch as JSON: ${(error as Error).message}`);
      }
      const w = await client.op({ operation: 'create_agent_watch', ...definition });
      print(watchLines(w), w);
      return EXIT.ok;
    }
    case 'show':
    case 'pause':
    case 'resume': {
      const w = sub === 'show' ? await client.op({ operation: 'get_agent_watch', watch_id: arg }) : await client.op({ operation: 'update_agent_watch', watch_id: arg, status: sub === 'pause' ? 'paused' : 'active' });
      print(watchLines(w), w);
      return EXIT.ok;
    }
    case 'delete': {
      const answer = await client.op({ operation: 'delete_agent_watch', watch_id: arg });
      print(`watch ${answer.watch_id} deleted (its runs' sessions stay)`, answer);
      return EXIT.ok;
    }
    case 'test': {
      const answer = await client.op({ operation: 'test_agent_watch', watch_id: arg });
      print(`watch ${answer.watch_id}: fires once now on ${answer.node ?? 'this node'}; harper-agent watch follow ${answer.watch_id} shows the run`, answer);
      return EXIT.ok;
    }
    case 'follow':
      return followWatch(client, arg!, flags.runs === undefined ? Number.POSITIVE_INFINITY : Number(flags.runs), io, json);
    default:
      throw new CliError(EXIT.usage, `usage: harper-agent ${usage}`);
  }
}

/** Follows a watch's runs as they fire: each new run's session followed live, then the watch's report of it. A run
 * that fired before the follow began is not shown again. */
async function followWatch(client: AgentClient, id: string, runs: number, io: Io, json: boolean): Promise<number> {
  if (!(runs >= 1)) throw new CliError(EXIT.usage, '--runs is a whole number of runs, 1 or more');
  const first = (await client.op({ operation: 'get_agent_watch', watch_id: id })) as WatchView;
  if (!json) io.stdout.write(`following watch ${first.name} (${first.trigger.description}); waiting for it to fire\n`);
  let last = first.lastSessionId ?? null;
  for (let seen = 0; seen < runs; ) {
    await new Promise((r) => setTimeout(r, 500));
    const w = (await client.op({ operation: 'get_agent_watch', watch_id: id })) as WatchView & { firing?: string | null };
    const current = w.firing ?? w.lastSessionId ?? null;
    if (!current || current === last) continue;
    last = current;
    seen++;
    if (!json) io.stdout.write(`fired: session ${current}\n`);
    const result = await follow(client, current, 0, io, json);
    report(result, io, json);
    // The report is stored once the run settles.
    for (let i = 0; i < 40; i++) {
      const after = (await client.op({ operation: 'get_agent_watch', watch_id: id })) as WatchView & { lastReport?: { session_id?: string } };
      if (after.lastReport && (after.lastReport as { session_id?: string }).session_id === current) {
        if (!json) io.stdout.write(`${watchLines(after)}\n`);
        break;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  return EXIT.ok;
}

export async function main(argv: string[], io: Io): Promise<number> {
  try {
    return await run(argv, io);
  } catch (error) {
    if (error instanceof CliError) {
      io.stderr.write(`harper-agent: ${error.message}\n`);
      return error.exitCode;
    }
    io.stderr.write(`harper-agent: ${(error as Error)?.stack ?? error}\n`);
    return EXIT.runFailed;
  }
}

// Run when executed (as the package's bin or `node dist/cli/main.js`), not when imported by the tests.
if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env });
}
