/**
 * The channel between the server and an engine process (src/server/engine-process/channel.ts): a shared-memory
 * ring per direction, the IPC pipe for a reader that sleeps and for what does not fit. Records cross the ring's
 * wrap intact; messages arrive in their order whichever way each came; across two real processes, a side
 * spinning on its ring is sent nothing over the pipe, and a side that does not spin is sent every message there. (The servers of
 * engines.test.ts answer through it, spinning and not, with the same bits.)
 */
import { ChildProcess, spawn } from 'child_process';
import * as path from 'path';
import { closeSync } from 'fs';
import { SharedRing } from '../../src/server/engine-process/shared-ring';
import { ChannelEndpoint, ChannelWire, channelRings, RING_BYTES } from '../../src/server/engine-process/channel';
import { hostAddon } from '../../src/common/host-addon';

jest.setTimeout(60_000);

/** A deterministic stream of numbers in [0, 1). */
function randomStream(seed: number) {
  let s = seed;
  return () => ((s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
}

const bytesOf = (n: number, tag: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + tag) & 255);

test('a ring hands over records intact and in order across its wrap, and refuses what it has no room for', () => {
  const size = 4096;
  const ring = new SharedRing(new ArrayBuffer(size + 64), 64, size);
  const random = randomStream(7);
  const queued: Uint8Array[] = [];
  let written = 0;
  let refused = 0;
  let seq = 0;
  let readSeq = 0;
  const readOne = () => {
    const record = ring.read()!;
    expect(record.seq).toBe(readSeq++);
    expect(Buffer.compare(record.payload, Buffer.from(queued.shift()!))).toBe(0);
  };
  while (written < 20 * size) {
    const payload = bytesOf(Math.floor(random() * 1500), seq);
    if (ring.tryWrite(payload, seq)) {
      queued.push(payload);
      written += payload.length;
      seq++;
    } else {
      refused++;
      expect(queued.length).toBeGreaterThan(0); // an empty ring takes any record that fits its capacity
      readOne();
    }
    if (random() < 0.4 && queued.length) readOne();
  }
  while (queued.length) readOne();
  expect(ring.read()).toBeUndefined();
  expect(refused).toBeGreaterThan(10);
  expect(ring.tryWrite(new Uint8Array(size), seq)).toBe(false); // larger than the ring: the pipe's
});

test('messages arrive in order whichever way each came: the ring to a spinning reader, or the pipe when the ring is full', async () => {
  const buffer = new ArrayBuffer(2 * 8192);
  const aToB = new SharedRing(buffer, 0, 8192);
  const bToA = new SharedRing(buffer, 8192, 8192);
  const received: number[] = [];
  const pipe = { channel: 0, wake: 0 };
  let b: ChannelEndpoint<never, { n: number; pad: Uint8Array }>;
  // The pipe delivers later, as IPC does: ring records written meanwhile may be read first.
  const a = new ChannelEndpoint<{ n: number; pad: Uint8Array }, never>(
    { out: aToB, in: bToA },
    (wire) => {
      pipe[wire.kind]++;
      setTimeout(() => b.receive(wire as ChannelWire<{ n: number; pad: Uint8Array }>), 1);
    },
    () => undefined,
    { busyPollMs: 0, busy: () => false },
  );
  b = new ChannelEndpoint({ out: bToA, in: aToB }, () => undefined, (m) => received.push(m.n), { busyPollMs: 50, busy: () => received.length < 300 });
  const random = randomStream(11);
  for (let n = 0; n < 300; n++) {
    a.send({ n, pad: bytesOf(Math.floor(random() * 3000), n) });
    if (random() < 0.1) await new Promise((r) => setTimeout(r, 2));
  }
  while (received.length < 300) await new Promise((r) => setTimeout(r, 5));
  expect(received).toEqual(Array.from({ length: 300 }, (_, n) => n));
  expect(pipe.channel).toBeGreaterThan(0); // some came over the pipe (the first: b was not spinning yet)
  expect(pipe.channel).toBeLessThan(300); // and some through the ring
});

/**
 * An echo at the other end of a real channel: a child process mapping the shared memory at its fd 4, counting what
 * came over the pipe. Spinning, it spins until it has echoed them all, as the engine process spins while a call runs:
 * a window of time would let a slow turn of a loaded machine end the spin between two messages.
 */
const ECHO = `
const { closeSync } = require('fs');
const { hostAddon } = require(${JSON.stringify(path.resolve('dist/common/host-addon.js'))});
const { ChannelEndpoint, channelRings, RING_BYTES } = require(${JSON.stringify(path.resolve('dist/server/engine-process/channel.js'))});
const buffer = hostAddon().mapSharedMemory(4, 2 * RING_BYTES);
closeSync(4);
const piped = { channel: 0, wake: 0 };
const [spinning, count] = [process.argv[1] === 'true', Number(process.argv[2])];
let echoed = 0;
const echo = new ChannelEndpoint(channelRings(buffer, 'engine'), (w) => process.send(w), (m) => echo.send({ n: m.n, state: m.state, piped, echoed: ++echoed }),
  { busyPollMs: spinning ? 1 : 0, busy: () => echoed < count });
process.on('message', (w) => { piped[w.kind]++; echo.receive(w); });
process.on('disconnect', () => process.exit(0));
`;

type Piped = { channel: number; wake: number };

async function roundTrips(spinning: boolean, count: number): Promise<{ toEcho: Piped; toUs: Piped }> {
  const shared = hostAddon()!.createSharedMemory(2 * RING_BYTES);
  const child: ChildProcess = spawn(process.execPath, ['-e', ECHO, String(spinning), String(count)], { serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc', shared.fd] });
  closeSync(shared.fd);
  let pending: ((m: any) => void) | undefined;
  const toUs = { channel: 0, wake: 0 };
  const us = new ChannelEndpoint<object, any>(channelRings(shared.buffer, 'server'), (w) => child.send(w), (m) => pending!(m), { busyPollMs: spinning ? 1 : 0, busy: () => pending !== undefined });
  child.on('message', (w: ChannelWire<any>) => {
    toUs[w.kind]++;
    us.receive(w);
  });
  let last: any;
  try {
    for (let n = 0; n < count; n++) {
      const state = Int32Array.from({ length: 1000 }, (_, i) => i * n);
      last = await new Promise((resolve) => {
        pending = resolve;
        us.send({ n, state });
      });
      pending = undefined;
      expect(last.n).toBe(n);
      expect(Array.from(last.state)).toEqual(Array.from(state)); // (an Int32Array of this realm against one of jest's)
    }
  } finally {
    child.kill();
  }
  expect(last.echoed).toBe(count);
  return { toEcho: last.piped, toUs };
}

describe('across two processes', () => {
  beforeAll(() => expect(hostAddon()).toBeDefined()); // built by the set-up (csrc/host_addon/)

  test('spinning, messages cross in shared memory alone', async () => {
    const { toEcho, toUs } = await roundTrips(true, 100);
    expect(toEcho).toEqual({ channel: 1, wake: 0 }); // the first: the echo was not spinning yet
    expect(toUs).toEqual({ channel: 0, wake: 0 }); // we spin from each send until its reply
  });

  test('not spinning, every message crosses over the pipe', async () => {
    const { toEcho, toUs } = await roundTrips(false, 50);
    expect(toEcho).toEqual({ channel: 50, wake: 0 }); // each counted before the echo reads it
    expect(toUs).toEqual({ channel: 50, wake: 0 });
  });
});

test('the shared memory is sized and refused as documented', () => {
  expect(() => hostAddon()!.createSharedMemory(0)).toThrow(/size/);
  expect(RING_BYTES % 8).toBe(0);
});
