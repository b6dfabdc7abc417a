/**
 * What the server answers while its engines load (it listens first, so that probes get an answer):
 * GET /ready and GET /health 503 saying so, every other request 503 with Retry-After.
 */
import { IncomingMessage, ServerResponse } from 'http';
import { newRequestId } from '../http/request-id';

export function answerWhileLoading(req: IncomingMessage, res: ServerResponse) {
  const path = (req.url ?? '/').split('?')[0];
  const body =
    path === '/ready' ? { ready: false, state: 'loading' } : path === '/health' ? { ok: false, engine: 'loading' } : { detail: 'the server is loading its engines: GET /ready answers 200 once it can answer' };
  const id = newRequestId();
  res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'retry-after': '5', 'x-typesafe-request-id': id, 'x-request-id': id });
  res.end(JSON.stringify(body));
}
