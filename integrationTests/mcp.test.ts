// The agent over MCP on a real Harper, driven by the official SDK's own client over Streamable HTTP: the tools and their
// hints, a prompt driven to completion and read back, and a user without the role who sees no tools and is refused.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { sharedHarper, type TestHarper } from './harness.js';

async function connect(h: TestHarper, username: string, password: string): Promise<Client> {
  const client = new Client({ name: 'harper-agent-test', version: '1.0.0' });
  const authorization = 'Basic ' + Buffer.from(`${username}:${password}`).toString('base64');
  await client.connect(new StreamableHTTPClientTransport(new URL(`${h.harper.httpUrl}agent/mcp`), { requestInit: { headers: { authorization } } }));
  return client;
}

const text = (result: any) => result.content[0].text as string;

describe('the agent over MCP (/agent/mcp), with the SDK client', function () {
  this.timeout(120_000);
  let h: TestHarper;
  let admin: Client;

  before(async () => {
    h = await sharedHarper();
    admin = await connect(h, h.harper.admin.username, h.harper.admin.password);
  });
  after(async () => {
    await admin?.close();
  });

  it('lists the five agent operations with hand-written descriptions and read-only/destructive hints', async () => {
    const { tools } = await admin.listTools();
    expect(tools.map((t) => [t.name, t.annotations?.readOnlyHint, t.annotations?.destructiveHint])).to.deep.equal([
      ['agent_prompt', false, true],
      ['get_agent_session', true, false],
      ['list_agent_sessions', true, false],
      ['approve_agent_action', false, true],
      ['cancel_agent_run', false, true],
    ]);
    const prompt = tools.find((t) => t.name === 'agent_prompt')!;
    expect(prompt.description).to.match(/^Ask the Harper Agent to investigate/);
    expect(prompt.inputSchema).to.deep.include({ type: 'object', required: ['message'] });
    expect(Object.keys(prompt.inputSchema.properties!)).to.deep.equal(['message', 'session_id']);
  });

  it('drives a prompt to completion and reads the session back', async () => {
    writeFileSync(path.join(h.logsDir, 'mcp.log'), 'first line\nsecond line with an error\nthird\n');
    const started = JSON.parse(text(await admin.callTool({ name: 'agent_prompt', arguments: { message: 'summarize logs/mcp.log' } })));
    expect(started.status).to.equal('running');
    let session: any;
    for (let i = 0; i < 100; i++) {
      session = JSON.parse(text(await admin.callTool({ name: 'get_agent_session', arguments: { session_id: started.session_id } })));
      if (session.status !== 'running') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect([session.status, session.lastError]).to.deep.equal(['completed', null]);
    expect(session.messages.at(-1).content).to.match(/^logs\/mcp\.log: 3 lines, 43 bytes, read in 1 page\(s\); 43 bytes of text seen\. 1 line\(s\) mention "error"/);
    const listed = JSON.parse(text(await admin.callTool({ name: 'list_agent_sessions', arguments: { limit: 5 } })));
    expect(listed.sessions.map((s: any) => s.session_id)).to.include(started.session_id);
    // The operations' own input checks apply.
    const bad = await admin.callTool({ name: 'get_agent_session', arguments: {} });
    expect(bad.isError).to.equal(true);
    expect(JSON.parse(text(bad))).to.deep.equal({ status: 400, error: 'get_agent_session: "session_id" is required' });
  });

  it('a user without the role sees no tools, and a call is refused as the operations API refuses it', async () => {
    expect((await h.op({ operation: 'add_role', role: 'mcp_reader', permission: { super_user: false } })).status).to.equal(200);
    expect((await h.op({ operation: 'add_user', role: 'mcp_reader', username: 'mcp_reader', password: 'reader-pass', active: true })).status).to.equal(200);
    const reader = await connect(h, 'mcp_reader', 'reader-pass');
    try {
      expect((await reader.listTools()).tools).to.deep.equal([]);
      const refused = await reader.callTool({ name: 'agent_prompt', arguments: { message: 'hello' } });
      expect(refused.isError).to.equal(true);
      expect(JSON.parse(text(refused))).to.deep.equal({ status: 403, error: 'agent_prompt needs a super_user role or a role named in agent.roles (the role mcp_reader is not)' });
      const direct = await h.op({ operation: 'agent_prompt', message: 'hello' }, { username: 'mcp_reader', password: 'reader-pass' });
      expect(direct).to.deep.equal({ status: 403, body: { error: 'agent_prompt needs a super_user role or a role named in agent.roles (the role mcp_reader is not)' } });
    } finally {
      await reader.close();
    }
  });
});
