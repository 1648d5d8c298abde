// Reusable read buffers. A fresh 128 KiB buffer per page costs more (allocation and first-touch page faults) than
// the read itself; pages and look-backs borrow one of these instead and copy out what they keep.
const free: Buffer[] = [];
const KEEP = 8;

export async function withScratch<T>(size: number, use: (buf: Buffer) => Promise<T>): Promise<T> {
  const i = free.findIndex((b) => b.length >= size);
  const buf = i >= 0 ? free.splice(i, 1)[0]! : Buffer.allocUnsafe(Math.max(size, 192 * 1024));
  try {
    return await use(buf.subarray(0, size));
  } finally {
    if (free.length < KEEP) free.push(buf);
  }
}
