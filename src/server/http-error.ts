/** An error with the HTTP status and `detail` a client gets. */
export class HttpError extends Error {
  constructor(readonly status: number, readonly detail: string) {
    super(detail);
  }
}
