/**
 * Lingering close, as nginx's `lingering_close`: a request refused before its body was read (413
 * on its declared length or once over the limit, a body that does not decompress) is answered with
 * `Connection: close`, and the socket is closed only once the client has sent the rest of its body,
 * read here and discarded, or once a bound is reached (LINGER: 30 s in all, 5 s without a byte, as
 * nginx's lingering_time and lingering_timeout; 256 MiB).
 *
 * Closing at once while the client is still writing makes the kernel answer its next segments with
 * a reset: the client's write fails with EPIPE or ECONNRESET, often before it has read the 413
 * (1 of 20 such 70 MiB requests on this machine), and the format's clients treat a broken
 * connection as retryable, so they send the whole body again.
 */
import { IncomingMessage } from 'http';

export const LINGER = { totalMs: 30_000, idleMs: 5_000, bytes: 256 << 20, pollMs: 100 };

/** Delays the close Node makes after the response (socket.destroySoon) until `req`'s body is in, or a bound. */
export function lingerBeforeClose(req: IncomingMessage, limits = LINGER) {
  const socket = req.socket;
  const closeNow = socket.destroySoon.bind(socket);
  socket.destroySoon = () => {
    if (req.complete || socket.destroyed) return closeNow();
    // The body no longer goes to the reader that refused it (a paused decompressor, say): into the void.
    req.unpipe();
    req.resume();
    const start = Date.now(), firstByte = socket.bytesRead;
    let lastByte = firstByte, lastAt = start;
    const finish = () => {
      clearInterval(poll);
      req.off('end', finish);
      socket.off('close', finish);
      closeNow();
    };
    // The HTTP parser reads the socket's handle directly (no 'data' events), so its byte count is polled.
    const poll = setInterval(() => {
      const now = Date.now();
      if (socket.bytesRead !== lastByte) [lastByte, lastAt] = [socket.bytesRead, now];
      if (req.complete || now - start > limits.totalMs || now - lastAt > limits.idleMs || lastByte - firstByte > limits.bytes) finish();
    }, limits.pollMs);
    poll.unref();
    req.once('end', finish);
    socket.once('close', finish);
  };
}
