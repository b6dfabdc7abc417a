/**
 * One direction of the channel between the server and an engine process (channel.ts): a ring of records in
 * memory both processes map, with one writer and one reader. A record is its byte length and sequence number
 * (two int32s), then its bytes, padded to 8. A record that would run past the end is written at the start
 * instead, behind a wrap mark. The writer publishes a record by moving the write position (an atomic store),
 * the reader frees it by moving the read position; one byte position is never both, so equal positions mean
 * empty. The header also holds the reader's polling flag: while it is set, the reader is spinning on the
 * write position and needs no wake-up.
 */

/** Header words (int32 indices), each on its own cache line: the two processes write different ones. */
const WRITE = 0;
const READ = 16;
const POLLING = 32;
export const RING_HEADER_BYTES = 192;
const WRAP = -1;
const RECORD_HEADER = 8;

const padded = (n: number) => (n + 7) & ~7;

export class SharedRing {
  private readonly header: Int32Array;
  private readonly words: Int32Array;
  private readonly bytes: Uint8Array;
  private readonly capacity: number;

  /** The ring at `offset` of `buffer`, `size` bytes in all (header included), a multiple of 8. */
  constructor(buffer: ArrayBuffer, offset: number, size: number) {
    this.capacity = size - RING_HEADER_BYTES;
    if (offset % 8 || this.capacity <= 0 || this.capacity % 8) throw new RangeError(`a ring needs 8-aligned room beyond its ${RING_HEADER_BYTES}-byte header`);
    this.header = new Int32Array(buffer, offset, RING_HEADER_BYTES / 4);
    this.words = new Int32Array(buffer, offset + RING_HEADER_BYTES, this.capacity / 4);
    this.bytes = new Uint8Array(buffer, offset + RING_HEADER_BYTES, this.capacity);
  }

  /** Writes a record; false when the ring has no room for it now (the caller sends it another way). */
  tryWrite(payload: Uint8Array, seq: number): boolean {
    const need = RECORD_HEADER + padded(payload.length);
    const w = Atomics.load(this.header, WRITE);
    const r = Atomics.load(this.header, READ);
    const free = this.capacity - ((w - r + this.capacity) % this.capacity) - RECORD_HEADER;
    const wraps = this.capacity - w < need;
    if ((wraps ? this.capacity - w : 0) + need > free) return false;
    const at = wraps ? 0 : w;
    if (wraps) this.words[w >> 2] = WRAP;
    this.words[at >> 2] = payload.length;
    this.words[(at >> 2) + 1] = seq;
    this.bytes.set(payload, at + RECORD_HEADER);
    Atomics.store(this.header, WRITE, (at + need) % this.capacity);
    return true;
  }

  /** The next record, copied out (its bytes are overwritten once freed), and freed; undefined when empty. */
  read(): { seq: number; payload: Buffer } | undefined {
    let r = Atomics.load(this.header, READ);
    if (r === Atomics.load(this.header, WRITE)) return;
    // A wrap mark is published together with the record it moved to the start.
    if (this.words[r >> 2] === WRAP) r = 0;
    const length = this.words[r >> 2];
    const seq = this.words[(r >> 2) + 1];
    const payload = Buffer.from(this.bytes.subarray(r + RECORD_HEADER, r + RECORD_HEADER + length));
    Atomics.store(this.header, READ, (r + RECORD_HEADER + padded(length)) % this.capacity);
    return { seq, payload };
  }

  /** Set by the reader while it spins on this ring. */
  setReaderPolling(on: boolean) {
    Atomics.store(this.header, POLLING, on ? 1 : 0);
  }

  get readerPolling(): boolean {
    return Atomics.load(this.header, POLLING) === 1;
  }
}
