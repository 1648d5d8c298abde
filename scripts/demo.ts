// `npm run demo`: boots Harper with the component and the provider-compatible server, writes a 1 MB big.log into
// Harper's log directory, and shows the three recovery scenarios as tables.
import { bootHarper } from '../integrationTests/harness.js';
import { ProviderServer } from '../integrationTests/providerServer/server.js';
import { brokenSession, formatScenario, twoPrompts, writeBigLog } from '../integrationTests/recoveryScenarios.js';

const server = await new ProviderServer().start();
console.log(`provider-compatible server on ${server.url}; booting Harper (about 10 s)...`);
const h = await bootHarper();
try {
  const bigLog = writeBigLog(h.logsDir);
  console.log(`Harper up (operations API ${h.harper.opsUrl}); wrote logs/big.log (${Buffer.byteLength(bigLog).toLocaleString('en-US')} bytes). Provider: openai SDK.`);
  console.log(formatScenario(await twoPrompts(h, server, 'openai', 300_000)));
  console.log(formatScenario(await twoPrompts(h, server, 'openai', 40_000)));
  console.log(formatScenario(await brokenSession(h, server, 'openai', 300_000, bigLog)));
} finally {
  await h.stop();
  await server.close();
}
