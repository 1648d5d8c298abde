// Where the agent runs, told to the model in the system prompt so "what Harper version is this?" needs no tool call
// (system_information has the OS and Node, not Harper's own version). Read once per process.
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { workerData } from 'node:worker_threads';

export interface HostEnvironment {
  /** The running Harper's version (its own package.json), or null where it cannot be found. */
  harper: string | null;
  /** This Harper node's name (replication hostname). */
  node: string | null;
  /** Harper's worker thread count (its workerData), or null outside a Harper worker. */
  threads: number | null;
  os: string;
  nodeVersion: string;
  agent: string;
}

/** The version in the package.json of the harperdb that started this process (walking up from its entry script). */
export function harperVersion(entry = process.argv[1]): string | null {
  try {
    let dir = path.dirname(realpathSync(entry!));
    for (;;) {
      const file = path.join(dir, 'package.json');
      if (existsSync(file)) {
        const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
        if (pkg.name === 'harperdb' && pkg.version) return pkg.version;
      }
      const up = path.dirname(dir);
      if (up === dir) return null;
      dir = up;
    }
  } catch {
    return null;
  }
}

export function hostEnvironment(agentVersion: string, node: string | null): HostEnvironment {
  const count = (workerData as { workerCount?: unknown } | null)?.workerCount;
  return {
    harper: harperVersion(),
    node,
    threads: typeof count === 'number' ? count : null,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    nodeVersion: process.version,
    agent: agentVersion,
  };
}

/** The block the system prompt ends with: a few hundred bytes, the same for every request of a session (the time a
 * prompt was sent goes with the prompt: agent/context/request.ts). */
export function environmentBlock(env: HostEnvironment): string {
  return [
    '=== Where you run ===',
    `Harper ${env.harper ?? '(version unknown)'}${env.node ? ` on node ${env.node}` : ''}${env.threads !== null ? `, ${env.threads} worker thread${env.threads === 1 ? '' : 's'}` : ''}.`,
    `${env.os}, Node.js ${env.nodeVersion}. Harper Agent ${env.agent}.`,
    'Each prompt ends with the time it was sent, [sent <UTC time>].',
  ].join('\n');
}
