// A provider's prompt cache as each API bills it, for the fake provider server (server.ts, `caching` on): what part of a
// request's input was read from the cache, what was written to it, and the running bill.
// - OpenAI caches automatically: the longest prefix (tools, then messages) this request shares with an earlier one, in
//   128-token steps from 1,024 tokens, is read; nothing is billed for writing.
// - Anthropic and Bedrock cache only at marks (cache_control on a block; a cachePoint block): a request reads the
//   longest prefix written at a mark of an earlier request that ends within 20 blocks before one of its own marks, and
//   writes its newest mark's prefix past what it read. A mark's prefix under 1,024 tokens is not cached.
// Tokens are a quarter of the bytes, as the server counts them everywhere (turnUsage).
import { createHash } from 'node:crypto';
import type { Provider } from './server.js';

export interface CacheUse {
  /** Every input token of the request. */
  input: number;
  read: number;
  write: number;
}

export interface Bill {
  requests: number;
  /** Input tokens neither read from nor written to the cache. */
  uncached: number;
  read: number;
  write: number;
  output: number;
}

/** Prices as the server bills them (US dollars per million tokens). */
export interface BillPrice {
  inputPerMTokens: number;
  outputPerMTokens: number;
  cacheReadPerMTokens: number;
  cacheWritePerMTokens: number;
}

const MIN_TOKENS = 1024;
const OPENAI_STEP = 128;
const LOOKBACK_BLOCKS = 20;
const tokens = (bytes: number) => Math.floor(bytes / 4);

/** A request as the cache sees it: its blocks in prefix order (tools, system, each message's content blocks), each as
 * JSON without its mark, and which blocks end a marked prefix. */
interface Blocks {
  text: string[];
  marked: Set<number>;
}

function withoutMark(block: any): any {
  if (!block || typeof block !== 'object') return block;
  const { cache_control: _mark, ...rest } = block;
  return rest;
}

function anthropicBlocks(body: any): Blocks {
  const text: string[] = [];
  const marked = new Set<number>();
  const add = (block: any) => {
    if (block?.cache_control) marked.add(text.length);
    text.push(JSON.stringify(withoutMark(block)));
  };
  for (const tool of body.tools ?? []) add(tool);
  if (typeof body.system === 'string') add({ type: 'text', text: body.system });
  else for (const b of body.system ?? []) add(b);
  for (const m of body.messages ?? []) {
    if (typeof m.content === 'string') add({ role: m.role, type: 'text', text: m.content });
    else for (const b of m.content) add({ role: m.role, ...b });
  }
  return { text, marked };
}

function bedrockBlocks(body: any): Blocks {
  const text: string[] = [];
  const marked = new Set<number>();
  // A cachePoint block marks the prefix of every block before it.
  const add = (block: any) => {
    if (block?.cachePoint) {
      if (text.length) marked.add(text.length - 1);
    } else text.push(JSON.stringify(block));
  };
  for (const tool of body.toolConfig?.tools ?? []) add(tool);
  for (const b of body.system ?? []) add(b);
  for (const m of body.messages ?? []) for (const b of m.content ?? []) add(b.cachePoint ? b : { role: m.role, ...b });
  return { text, marked };
}

export class PromptCache {
  /** Hashes of the prefixes written at marks (Anthropic, Bedrock). */
  private readonly written = new Set<string>();
  /** Each earlier request's prompt as OpenAI's cache compares them. */
  private readonly seen: string[] = [];
  bill: Bill = { requests: 0, uncached: 0, read: 0, write: 0, output: 0 };

  reset(): void {
    this.written.clear();
    this.seen.length = 0;
    this.bill = { requests: 0, uncached: 0, read: 0, write: 0, output: 0 };
  }

  /** What a request (answered 200) reads and writes, added to the bill with its output. */
  use(provider: Provider, body: any, input: number, output: number): CacheUse {
    const use = provider === 'openai' ? this.openai(body, input) : provider === 'anthropic' ? this.atMarks(anthropicBlocks(body), input) : provider === 'bedrock' ? this.atMarks(bedrockBlocks(body), input) : { input, read: 0, write: 0 };
    this.bill.requests++;
    this.bill.uncached += use.input - use.read - use.write;
    this.bill.read += use.read;
    this.bill.write += use.write;
    this.bill.output += output;
    return use;
  }

  private openai(body: any, input: number): CacheUse {
    const prompt = JSON.stringify(body.tools ?? []) + (body.messages ?? []).map((m: unknown) => JSON.stringify(m)).join('');
    let shared = 0;
    for (const earlier of this.seen) {
      let i = 0;
      const n = Math.min(earlier.length, prompt.length);
      while (i < n && earlier.charCodeAt(i) === prompt.charCodeAt(i)) i++;
      shared = Math.max(shared, i);
    }
    this.seen.push(prompt);
    const sharedTokens = tokens(Buffer.byteLength(prompt.slice(0, shared)));
    const read = sharedTokens >= MIN_TOKENS ? Math.min(input, Math.floor(sharedTokens / OPENAI_STEP) * OPENAI_STEP) : 0;
    return { input, read, write: 0 };
  }

  private atMarks(blocks: Blocks, input: number): CacheUse {
    // The prefix through each block: its hash and its tokens.
    const hashes: string[] = [];
    const sizes: number[] = [];
    const h = createHash('sha256');
    let bytes = 0;
    for (const t of blocks.text) {
      h.update(t);
      hashes.push(h.copy().digest('hex'));
      bytes += Buffer.byteLength(t);
      sizes.push(tokens(bytes));
    }
    const marks = [...blocks.marked].filter((k) => sizes[k]! >= MIN_TOKENS).sort((a, b) => a - b);
    let readUpTo = -1;
    for (const m of marks) {
      for (let j = m; j >= Math.max(0, m - LOOKBACK_BLOCKS); j--) {
        if (this.written.has(hashes[j]!)) {
          readUpTo = Math.max(readUpTo, j);
          break;
        }
      }
    }
    const read = readUpTo >= 0 ? sizes[readUpTo]! : 0;
    const last = marks.at(-1);
    const write = last !== undefined && last > readUpTo ? sizes[last]! - read : 0;
    for (const m of marks) this.written.add(hashes[m]!);
    // Never more than the request holds (its bytes count a little more than its blocks do).
    const cappedRead = Math.min(read, input);
    return { input, read: cappedRead, write: Math.min(write, input - cappedRead) };
  }

  /** What the bill comes to at a price. */
  costUsd(price: BillPrice): number {
    const b = this.bill;
    return (b.uncached * price.inputPerMTokens + b.read * price.cacheReadPerMTokens + b.write * price.cacheWritePerMTokens + b.output * price.outputPerMTokens) / 1_000_000;
  }

  /** The billed input in tokens at the input price: what the input cost, divided by the price of one uncached token. */
  billedInputTokens(price: BillPrice): number {
    const b = this.bill;
    return b.uncached + (b.read * price.cacheReadPerMTokens + b.write * price.cacheWritePerMTokens) / price.inputPerMTokens;
  }
}
