// This thread's copies of recent sessions' message records, so that a turn late in a long session reads only the records
// written since the session was last read here, not the whole transcript again (the working set and the end of each
// prompt read it). A copy is current while the row's revision (a tag every write of the row gets, unique to its writer)
// is the one the copy was made at. A row that only grew since is caught up by reading the new records and checking that
// they account for the row's messageCount and bytes; anything else is read whole again. See DESIGN.md ("A thread's copy
// of a transcript").
import type { StoredMessage } from './compaction.js';
import type { SessionHeader } from './session.js';

export interface KeyedMessage {
  key: string;
  seq: number;
  message: StoredMessage;
}

interface Copy {
  revision: string;
  count: number;
  bytes: number;
  keyed: KeyedMessage[];
}

/** A message's share of a row's `bytes`: its JSON, plus the comma before it. */
export const shareOfBytes = (m: StoredMessage, seq: number) => Buffer.byteLength(JSON.stringify(m)) + (seq > 0 ? 1 : 0);

export class TranscriptCache {
  private readonly copies = new Map<string, Copy>();
  private held = 0;

  /** At most `maxSessions` copies and `maxBytes` of transcript (by the rows' bytes), least recently used dropped. */
  // Sessions sized for many running at once on one thread (400 in bench:concurrent): a copy dropped costs the next read
  // of that session its whole transcript. The bytes bound holds the memory.
  constructor(private readonly maxSessions = 1024, private readonly maxBytes = 64 * 1024 * 1024) {}

  /** The records of a row this thread holds whole ('current'), or of a row that only grew since ('behind': read the
   * records from seq `count` on and pass them to `catchUp`). */
  lookup(id: string, revision: string | undefined, header: SessionHeader): { state: 'current'; keyed: KeyedMessage[] } | { state: 'behind'; count: number } | undefined {
    const copy = this.copies.get(id);
    if (!copy) return undefined;
    if (revision !== undefined && copy.revision === revision) return { state: 'current', keyed: this.touch(id, copy).keyed };
    return copy.count < header.messageCount ? { state: 'behind', count: copy.count } : undefined;
  }

  /** The copy with `added` (the records from its end on) when they account for the row's count and bytes; else undefined. */
  catchUp(id: string, revision: string | undefined, header: SessionHeader, added: KeyedMessage[]): KeyedMessage[] | undefined {
    const copy = this.copies.get(id);
    if (!copy || revision === undefined) return undefined;
    const bytes = added.reduce((sum, k) => sum + shareOfBytes(k.message, k.seq), copy.bytes);
    if (bytes !== header.bytes || copy.count + added.length !== header.messageCount) return undefined;
    const keyed = [...copy.keyed, ...added];
    this.remember(id, revision, header, keyed);
    return keyed;
  }

  /** This thread's copy of the row at `revision` (what a change read), for the change to extend. */
  holds(id: string, revision: string | undefined): KeyedMessage[] | undefined {
    const copy = this.copies.get(id);
    return copy && revision !== undefined && copy.revision === revision ? copy.keyed : undefined;
  }

  remember(id: string, revision: string | undefined, header: SessionHeader, keyed: KeyedMessage[]): void {
    this.forget(id);
    if (revision === undefined || header.bytes > this.maxBytes) return;
    this.copies.set(id, { revision, count: header.messageCount, bytes: header.bytes, keyed });
    this.held += header.bytes;
    for (const [oldest, copy] of this.copies) {
      if (this.copies.size <= this.maxSessions && this.held <= this.maxBytes) break;
      this.copies.delete(oldest);
      this.held -= copy.bytes;
    }
  }

  forget(id: string): void {
    const copy = this.copies.get(id);
    if (!copy) return;
    this.copies.delete(id);
    this.held -= copy.bytes;
  }

  private touch(id: string, copy: Copy): Copy {
    this.copies.delete(id);
    this.copies.set(id, copy);
    return copy;
  }
}
