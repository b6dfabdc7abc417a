/** POST/GET /v1/tasks, DELETE /v1/tasks/{id}, POST /v1/tasks/import (tasks and abstention tasks) (docs/tasks.md). */
import Router from '@koa/router';
import { exportForm, summaryOf } from '../../tasks/export';
import { parseImport } from '../../tasks/import';
import { registerTask, servedQuestion } from '../../tasks/register';
import { HttpError, ValidationError } from '../../wire/http-error';
import { requestedCacheSalt } from '../service/request-headers';
import { Service } from '../service/service';
import { parseRegistration, registrationError } from './task-body';

export function taskRoutes(router: Router, service: Service) {
  const store = service.tasks;

  router.post('/v1/tasks', async (ctx) => {
    const parsed = parseRegistration(ctx.request.body);
    const cacheSalt = requestedCacheSalt(ctx, service.cacheSaltHeader);
    try {
      store.refuseHeld(servedQuestion(service, parsed.spec).match_key, parsed.id);
      const task = await registerTask(service, store.fingerprint, parsed, cacheSalt);
      ctx.body = { ...summaryOf(task), replaced: await store.register(task) };
    } catch (e) {
      throw registrationError(e);
    }
  });

  router.get('/v1/tasks', (ctx) => {
    const full = ctx.query.full === '1' || ctx.query.full === 'true';
    const tasks = store.list();
    ctx.body = {
      ...(full ? exportForm(tasks, store.abstentionList(), store.fingerprint.hash) : { fingerprint: store.fingerprint.hash, tasks: tasks.map(summaryOf) }),
      enabled: service.taskBook.enabled,
      fingerprint_components: store.fingerprint.components,
      head_engine: service.headEngineReport,
      tasks_file: store.file ?? null,
      refused_at_start: store.refused,
    };
  });

  router.delete('/v1/tasks/:id', async (ctx) => {
    const id = ctx.params.id;
    if (!(await store.remove(id))) throw new HttpError(404, `no task has the id ${JSON.stringify(id)}`);
    ctx.body = { deleted: id };
  });

  router.post('/v1/tasks/import', async (ctx) => {
    const { tasks, abstention, problems } = parseImport(ctx.request.body);
    if (problems.length) throw new ValidationError(problems.slice(0, 20).map((p) => ({ ...p, type: p.type ?? 'value_error' })));
    ctx.body = await store.importAll(tasks, abstention);
  });
}
