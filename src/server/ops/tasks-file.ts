/**
 * Replicas sharing --tasks-file: the store reloads the file another process replaced
 * (src/tasks/store.ts, shared-file.ts); here each reload is logged and counted.
 */
import { refusalLine, TaskStore } from '../../tasks/store';
import { Logger } from './logger';
import { Metrics } from './metrics';

/** Starts watching the file (a store without one does nothing). */
export function watchTasksFile(tasks: TaskStore, logger: Logger, metrics: Metrics) {
  tasks.onReload = (r) => {
    metrics.tasksFileReloads.inc({ result: 'error' in r ? 'unreadable' : 'loaded' });
    if ('error' in r) return logger.warn({ event: 'tasks_file_unreadable' }, r.error);
    logger.info({ event: 'tasks_file_reloaded', tasks: r.tasks, abstention_tasks: r.abstention_tasks, refused: r.refused.length }, `--tasks-file replaced by another process: ${r.tasks} tasks and ${r.abstention_tasks} abstention tasks loaded`);
    for (const x of r.refused) logger.warn({ event: 'task_refused', id: x.id }, refusalLine(x));
  };
  tasks.watch();
}
