// The setup every provider-path test file shares: the shared Harper, a provider-compatible server, and the agent
// put back on the local backend afterwards.
import { expect } from 'chai';
import { sharedHarper, type TestHarper } from './harness.js';
import { ProviderServer } from './providerServer/server.js';

export interface ProviderSuite {
  h: TestHarper;
  server: ProviderServer;
}

export async function useLocal(h: TestHarper) {
  const r = await h.setConfig({ provider: 'local', baseUrl: null, apiKey: null, model: null, maxRetries: 2, maxToolResultBytes: 65536, contextWindowTokens: null, maxTokens: null, workingSetBytes: null, compaction: null, compactAtPercent: null, followupMinSeconds: null, maxFollowups: null, maxTurns: null, stream: null, prices: null, maxCostUsd: null, maxSessionCostUsd: null });
  expect(r.status).to.equal(200);
}

/** Registers the suite's hooks; `prepare` runs once Harper and the server are up. */
export function providerSuite(prepare?: (h: TestHarper) => void): ProviderSuite {
  const suite = { server: new ProviderServer() } as ProviderSuite;
  before(async function () {
    this.timeout(120_000);
    suite.h = await sharedHarper();
    await suite.server.start();
    prepare?.(suite.h);
  });
  after(async () => {
    // The server is closed even when Harper no longer answers: a listening server left open keeps mocha (and its
    // lane of npm test) from ever exiting.
    try {
      if (suite.h) await useLocal(suite.h);
    } finally {
      await suite.server.close();
    }
  });
  return suite;
}
