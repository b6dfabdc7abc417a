/**
 * GET / (the playground page) and GET /playground/<file>: static files read once at start-up from
 * src/server/playground/, plain HTML, CSS and ES modules with no build step and nothing from a CDN. The
 * Content-Security-Policy lets the page load only from this server (images it previews: data and
 * blob URLs), so it keeps working on a host without internet access.
 */
import Router from '@koa/router';
import * as fs from 'fs';
import * as path from 'path';
import { projectRoot } from '../../common/project-root';

const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.css': 'text/css; charset=utf-8', '.js': 'text/javascript; charset=utf-8' };
const CSP = "default-src 'self'; img-src 'self' data: blob:; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const DIR = path.join(projectRoot, 'src', 'server', 'playground'); // also when the server runs compiled, from dist/

export function playgroundRoutes(router: Router) {
  const files = new Map(fs.readdirSync(DIR).filter((f) => TYPES[path.extname(f)]).map((f) => [f, fs.readFileSync(path.join(DIR, f))]));
  const send = (ctx: Router.RouterContext, file: string | undefined) => {
    const content = file === undefined ? undefined : files.get(file);
    if (!content) return; // 404
    ctx.type = TYPES[path.extname(file!)];
    ctx.set({ 'Content-Security-Policy': CSP, 'X-Content-Type-Options': 'nosniff', 'Cache-Control': 'no-cache' });
    ctx.body = content;
  };
  router.get('/', (ctx) => send(ctx, 'index.html'));
  router.get('/playground/:file', (ctx) => send(ctx, ctx.params.file));
}
