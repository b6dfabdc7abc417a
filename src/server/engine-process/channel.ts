/**
 * The channel between the server and one engine process: a shared-memory ring each way (shared-ring.ts),
 * and the IPC pipe. Why: a message over the pipe wakes a sleeping process, about half a millisecond each
 * way on the VMs we measured (bench/README.md, "Front end"): more than the server's own work for a cached
 * request. A side that has just sent or received spins on its ring for `busyPollMs`, and while `busy()`
 * says so (the server: calls pending; the engine process: a call running), setting the ring's flag; a
 * message to a spinning reader goes through the ring and wakes nobody. A message to a reader that sleeps
 * goes over the pipe, as does one the ring has no room for. The price of spinning is a core busy while it
 * lasts: worth it where the engine computes on a GPU, not where the CPU's cores compute (the default is
 * by device: config/flags.ts, busyPollMs).
 *
 * Messages are numbered, and delivered in their order whichever way each came. A reader that stops
 * spinning clears its flag, then looks at its ring once more; a writer that found the flag set writes,
 * then reads the flag again and sends a wake-up if it was cleared meanwhile: so a record is either seen by
 * that last look or followed by a wake-up (both is harmless).
 */
import { deserialize, serialize } from 'v8';
import { SharedRing } from './shared-ring';

/** What crosses the IPC pipe. */
export type ChannelWire<M> = { kind: 'channel'; seq: number; message: M } | { kind: 'wake' };

/** Each direction's ring, header included: room for many calls of a long state, for pages touched only as used. */
export const RING_BYTES = 4 << 20;

/** The rings in one shared memory of 2 * RING_BYTES: the server's calls first, then the engine's replies. */
export function channelRings(buffer: ArrayBuffer, side: 'server' | 'engine'): { out: SharedRing; in: SharedRing } {
  const calls = new SharedRing(buffer, 0, RING_BYTES);
  const replies = new SharedRing(buffer, RING_BYTES, RING_BYTES);
  return side === 'server' ? { out: calls, in: replies } : { out: replies, in: calls };
}

export interface ChannelPolicy {
  /** How long after its last message a side spins on its ring before it sleeps (0: never spins). */
  busyPollMs: number;
  /** Spin regardless while this holds. */
  busy: () => boolean;
}

export class ChannelEndpoint<Out, In> {
  private sent = 0;
  private expected = 0;
  /** Messages not yet handled: the next in order, or ones that came ahead of an earlier one still in the pipe. */
  private early = new Map<number, In>();
  private spinning = false;
  private lastActive = 0;

  /**
   * `rings` undefined: no shared memory (the host addon is not built), every message goes over the pipe.
   * `post` writes to the pipe; `handle` takes each message in order.
   */
  constructor(
    private rings: { out: SharedRing; in: SharedRing } | undefined,
    private post: (wire: ChannelWire<Out>) => void,
    private handle: (message: In) => void,
    private policy: ChannelPolicy,
  ) {}

  send(message: Out) {
    // Spinning first: a reply that came before our flag went up would find it down and take the pipe.
    this.spin();
    const seq = this.sent++;
    const out = this.rings?.out;
    // A reader that is not spinning has to be woken over the pipe anyway: then the message itself goes that way.
    if (out?.readerPolling && out.tryWrite(serialize(message), seq)) {
      // It may have stopped since, after its last look at the ring.
      if (!out.readerPolling) this.post({ kind: 'wake' });
    } else {
      this.post({ kind: 'channel', seq, message });
    }
  }

  /** What came over the pipe: a message, or a wake-up to read the ring. */
  receive(wire: ChannelWire<In>) {
    this.spin(); // before handling, which may send: the other side's next message finds our flag up
    if (wire.kind === 'channel') this.deliver(wire.seq, wire.message);
    this.drain();
  }

  private deliver(seq: number, message: In) {
    this.early.set(seq, message);
    while (this.early.has(this.expected)) {
      const next = this.early.get(this.expected)!;
      this.early.delete(this.expected++);
      this.handle(next);
    }
  }

  /** Reads every record in the ring; whether there was one. */
  private drain(): boolean {
    let any = false;
    for (let record = this.rings?.in.read(); record; record = this.rings?.in.read()) {
      any = true;
      this.deliver(record.seq, deserialize(record.payload));
    }
    return any;
  }

  private spin() {
    if (!this.rings || this.policy.busyPollMs <= 0) return;
    this.lastActive = performance.now();
    if (this.spinning) return;
    this.spinning = true;
    this.rings.in.setReaderPolling(true);
    setImmediate(this.tick);
  }

  private tick = () => {
    const ring = this.rings!.in;
    if (this.drain()) this.lastActive = performance.now();
    if (this.policy.busy() || performance.now() - this.lastActive < this.policy.busyPollMs) return void setImmediate(this.tick);
    ring.setReaderPolling(false);
    // The last look: a writer that saw the flag still set sent no wake-up.
    if (this.drain()) {
      this.lastActive = performance.now();
      ring.setReaderPolling(true);
      return void setImmediate(this.tick);
    }
    this.spinning = false;
  };
}
