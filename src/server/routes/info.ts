/** GET /v1/models and GET /health (its report: health.ts). */
import Router from '@koa/router';
import { Context } from 'koa';
import * as fs from 'fs';
import * as path from 'path';
import { EngineDeadError } from '../../answering/engine-like';
import { ENGINE_DEAD_EXIT } from '../ops/lifecycle';
import { Service } from '../service/service';
import { healthReport } from './health';
import { imageEngineHealth } from './image-health';

/** The format's model alias: hosted servers list it, and the official clients send it by default. */
const MODEL_ALIAS = 'jev-latest';

/** Seconds a client is told to wait after the engine died: the server exits, and a supervisor restarts it. */
export const RETRY_AFTER_DEAD_S = '5';

/** /health once the engine has died: 503 with the report (also answered by the dead-engine gate in app.ts). */
export function answerDeadHealth(ctx: Context, reason: string) {
  ctx.status = 503;
  ctx.set('Retry-After', RETRY_AFTER_DEAD_S);
  ctx.body = { ok: false, engine: 'dead', reason, exit_code: ENGINE_DEAD_EXIT };
}

/** The checkpoint's date (its config.json's modification day): the nearest thing to a release date a folder has. */
function checkpointDate(checkpoint: string): string {
  for (const file of [path.join(checkpoint, 'config.json'), checkpoint]) {
    try {
      return fs.statSync(file).mtime.toISOString().slice(0, 10);
    } catch {
      /* next */
    }
  }
  return new Date(0).toISOString().slice(0, 10);
}

export function infoRoutes(router: Router, service: Service) {
  const released = checkpointDate(service.base.checkpoint);
  router.get('/v1/models', (ctx) => {
    const { servedName, base } = service;
    ctx.body = {
      // The format's model list, which both official clients read.
      models: [
        { name: servedName, description: `${base.profile.name} (${base.checkpoint})${base.randomWeights ? ': random-weight test model, answers are meaningless' : ''}`, release_date: released },
        { name: MODEL_ALIAS, description: `alias: answered by ${servedName}, the one model this server serves`, release_date: released },
      ],
      // OpenAI-style, for generic tooling.
      object: 'list',
      data: [{ id: servedName, object: 'model', created: Math.floor(service.startedAt.getTime() / 1000), owned_by: 'tqserve' }],
    };
  });

  router.get('/health', async (ctx) => {
    let report, members, imageEngine;
    try {
      members = await service.engine.memberReports();
      report = service.engine.summed(members);
      imageEngine = service.images && (await imageEngineHealth(service.images));
    } catch (e) {
      // The engine died while this call waited for its report.
      if (!(e instanceof EngineDeadError)) throw e;
      return answerDeadHealth(ctx, service.deadReason ?? e.message);
    }
    ctx.body = healthReport(service, report, members, imageEngine);
  });
}
