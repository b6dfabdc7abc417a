/**
 * Errors a client gets, in the wire format's conventions (FastAPI's, which both
 * official clients parse): a validation failure is 422 `{"detail": [{loc, msg,
 * type}, ...]}` listing every problem; any other error is `{"detail": "..."}`.
 */

/** One validation problem: where (`["body", "questions", "q1", "type"]`), what, and its class. */
export interface Problem {
  loc: (string | number)[];
  msg: string;
  type: string;
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string | Problem[],
    /** Extra response headers (Allow, Retry-After). */
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof detail === 'string' ? detail : detail.map((p) => `${p.loc.join('.')}: ${p.msg}`).join('; '));
  }
}

export class ValidationError extends HttpError {
  constructor(problems: Problem[]) {
    super(422, problems);
  }
}

/** A single problem at `loc` as a 422. */
export function invalid(loc: (string | number)[], msg: string, type = 'value_error'): ValidationError {
  return new ValidationError([{ loc, msg, type }]);
}
