// The bench's generated logs: access-log lines of varied length (an error every 53rd), written in 4 MiB blocks.
import { closeSync, openSync, readSync, writeSync } from 'node:fs';

const MiB = 1024 ** 2;

/** Writes `bytes` of log lines to `file`; answers the path. */
export function writeLogFile(file: string, bytes: number): string {
  const lines: string[] = [];
  for (let i = 0, size = 0; size < 4 * MiB; i++) {
    const line = `2026-12-02T10:${String(i % 60).padStart(2, '0')}:00.${String(i % 1000).padStart(3, '0')}Z [http/${i % 4}] [${i % 53 === 0 ? 'error' : 'info'}]: GET /api/records/${i * 7919 % 100000} ${i % 53 === 0 ? '500 upstream reset' : '200'} ${i % 97} ms ${'x'.repeat(i % 40)}\n`;
    lines.push(line);
    size += line.length;
  }
  const block = Buffer.from(lines.join(''));
  const fd = openSync(file, 'w');
  for (let written = 0; written < bytes; written += block.length) writeSync(fd, block, 0, Math.min(block.length, bytes - written));
  closeSync(fd);
  return file;
}

/** Offset of the first line start at or after `at`. */
export function lineStartAfter(file: string, at: number): number {
  const fd = openSync(file, 'r');
  const b = Buffer.alloc(64 * 1024);
  const n = readSync(fd, b, 0, b.length, at);
  closeSync(fd);
  return at + b.subarray(0, n).indexOf(10) + 1;
}
