/**
 * Requests Node's HTTP parser refuses before Koa sees them (a malformed request
 * line, an unknown method token, oversized headers): answered in the same JSON
 * form as every other error, with a request id, then the connection is closed.
 * Node's default is a bare "400 Bad Request" with no body.
 */
import { Server } from 'http';
import { Socket } from 'net';
import { newRequestId } from './request-id';

export function answerMalformedRequests(server: Server) {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) return socket.destroy();
    const [status, reason] = err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'Request Header Fields Too Large'] : [400, 'Bad Request'];
    const body = JSON.stringify({ detail: `malformed HTTP request (${err.code ?? 'parse error'}): ${err.message}` });
    const id = newRequestId();
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `x-typesafe-request-id: ${id}\r\nx-request-id: ${id}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}
