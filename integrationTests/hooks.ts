// Mocha root hooks for the integration suite: the shared Harper is stopped by PID after the last test.
import { stopShared } from './harness.js';

export const mochaHooks = {
  async afterAll(this: Mocha.Context) {
    this.timeout(30_000);
    await stopShared();
  },
};
