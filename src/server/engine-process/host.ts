/**
 * The engine process: loads the model and answers the server's calls, one at
 * a time in arrival order (the wait before a call starts is reported).
 */
import { Engine } from '../../engine/engine';
import { isEngineError } from '../../engine/native';
import { HostArgs, HostMessage, ServerMessage, WireError } from './protocol';

function toWire(e: unknown): WireError {
  if (isEngineError(e)) return { code: e.code, message: e.message, details: e.details ?? {} };
  return { code: 'INTERNAL', message: e instanceof Error ? e.message : String(e), details: {} };
}

function send(m: HostMessage) {
  process.send!(m);
}

async function main() {
  const args: HostArgs = JSON.parse(process.argv[2]);
  let engine: Engine;
  try {
    engine = await Engine.open(args.load);
  } catch (e) {
    send({ kind: 'fatal', error: toWire(e) });
    process.exit(1);
  }
  send({ kind: 'ready', info: engine.info });
  let queue: Promise<void> = Promise.resolve();
  process.on('message', (m: ServerMessage) => {
    if (m.kind !== 'answer') return;
    const arrived = performance.now();
    queue = queue.then(async () => {
      const started = performance.now();
      try {
        const r = await engine.answer(m.call);
        const engineMs = performance.now() - started;
        send({ kind: 'reply', id: m.id, reply: { answers: r.answers, timing: { ...r.timing, engineMs, waitMs: started - arrived } } });
      } catch (e) {
        send({ kind: 'error', id: m.id, error: toWire(e) });
      }
    });
  });
  // The server going away ends the engine too.
  process.on('disconnect', () => process.exit(0));
}

main();
