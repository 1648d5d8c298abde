// `npm start`: boots Harper from node_modules with the agent component, then prints where the operations API
// listens, the admin page, the CLI and a curl that prompts the agent. Ctrl-C stops Harper.
// As an operator's Harper runs: every request needs credentials, no inspector port, and no file watcher (a build, or
// npx marking the CLI executable, would otherwise reload the component and drop the ports for seconds).
// `npm run dev` (`--dev`) keeps Harper's dev conveniences instead: reload on change, inspector, local requests as
// super_user.
import os from 'node:os';
import path from 'node:path';
import { DEV_ADMIN, setModeInConfig, startHarper } from './harper.js';

// Outside the repository: Harper reloads a component when files change in it, and a root inside it (its database
// and log files) would reload it without end.
const rootPath = path.resolve(process.env.ROOTPATH ?? path.join(os.homedir(), '.harper-agent'));
const admin = { username: process.env.HDB_ADMIN_USERNAME ?? DEV_ADMIN.username, password: process.env.HDB_ADMIN_PASSWORD ?? DEV_ADMIN.password };
const httpPort = Number(process.env.HTTP_PORT ?? 9926);
const opsPort = Number(process.env.OPERATIONSAPI_NETWORK_PORT ?? 9925);

const dev = process.argv.includes('--dev');
const args = process.argv.slice(2).filter((a) => a !== '--dev');

// A root booted before keeps its config: dev or not is set in its file, every boot.
setModeInConfig(path.join(rootPath, 'harperdb-config.yaml'), dev);
// Production defaults open HTTPS on 9926 and 9925, the ports the plain HTTP_PORT and operations port default to:
// without certificates an operator set up, no secure ports (an env var the operator set wins).
const modeEnv: Record<string, string> = dev ? { DEFAULTS_MODE: 'dev' } : { DEFAULTS_MODE: 'prod', HTTP_SECUREPORT: 'null', OPERATIONSAPI_NETWORK_SECUREPORT: 'null' };
const env = Object.fromEntries(Object.entries(modeEnv).filter(([k]) => process.env[k] === undefined));

console.log(`Starting Harper (root ${rootPath}) with the harper-agent component${dev ? ' in dev mode' : ''}...`);
const harper = await startHarper({ rootPath, httpPort, opsPort, admin, env, command: dev ? 'dev' : 'run', output: 'inherit', args }, 120_000);
const stop = () => void harper.stop().then(() => process.exit(0));
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
harper.process.on('exit', (code) => process.exit(code ?? 0));

console.log(`
harper-agent is ready (Harper PID ${harper.pid}).
  ${dev ? 'Dev mode: local requests act as super_user without credentials, the component reloads on change, inspector on 9229.' : 'Every request needs credentials (a super_user for the agent operations and the admin page).'}
  Operations API: http://localhost:${opsPort}/  (admin user: ${admin.username})
  Admin page:     http://localhost:${httpPort}/agent/
  CLI:            HARPER_AGENT_URL=http://localhost:${opsPort}/ HARPER_AGENT_USER=${admin.username} HARPER_AGENT_PASSWORD=${admin.password} npx harper-agent prompt "summarize logs/hdb.log"
  Prompt the agent:
    curl -s -u ${admin.username}:${admin.password} -H 'content-type: application/json' http://localhost:${opsPort}/ \\
      -d '{"operation":"agent_prompt","message":"summarize logs/hdb.log"}'
  Then read the session (use the session_id it returned):
    curl -s -u ${admin.username}:${admin.password} -H 'content-type: application/json' http://localhost:${opsPort}/ \\
      -d '{"operation":"get_agent_session","session_id":"<session_id>"}'
Press Ctrl-C to stop Harper.`);
