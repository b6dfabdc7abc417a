/** Everything the routes share: the base, its renderer and temperatures, the engine, and the engine's state. */
import { AnsweringContext } from '../../answering/context';
import { AbstentionBook } from '../../tasks/abstention/book';
import { TaskBook } from '../../tasks/apply';
import { TaskStore } from '../../tasks/store';
import { ResolvedBase } from '../../config/bases';
import { CacheReport } from '../engine-process/protocol';
import { EngineGroup } from '../engine-process/group';
import { NativeEngineInfo } from '../../engine/native';
import { InFlight } from './inflight';
import { PixelBudget } from '../../images/preprocess';
import { Fingerprint } from '../../tasks/fingerprint';

/** --image-model: the image engine process and the image route's answering context. */
export interface ImageService {
  context: AnsweringContext;
  base: ResolvedBase;
  engineInfo: NativeEngineInfo;
  /** The recipe's pixel budget (--image-max-tokens). */
  budget: PixelBudget;
  maxTokens: number;
  cacheReport: () => Promise<CacheReport>;
  engineProcess: { pid: number | null; where: string };
  /** What image-route abstention tasks are fitted under. */
  fingerprint: Fingerprint;
}

export interface Service extends AnsweringContext {
  /** The serving model's engine processes (one, or --engines of them), routed among (engine-process/group.ts). */
  engine: EngineGroup;
  base: ResolvedBase;
  tasks: TaskStore;
  /** The tasks as the answering pipeline applies them (AnsweringContext's `taskBook`, with their switch). */
  taskBook: TaskBook;
  /** The abstention tasks and --abstain-option as the pipeline applies them (AnsweringContext's `abstentions`). */
  abstentions: AbstentionBook;
  /** Where intent heads' hidden states come from, as /health and GET /v1/tasks report it. */
  headEngineReport: Record<string, unknown>;
  engineInfo: NativeEngineInfo;
  engineProcess: { pid: number | null; where: string };
  debugReadout: boolean;
  /** `--cache-salt-header`: where a request's cache salt is read from when it sends no x-cache-salt. */
  cacheSaltHeader?: string;
  /** `--cors-origin`: the origin browsers may call from (`*`: any), or undefined (off). */
  corsOrigin?: string;
  inflight: InFlight;
  startedAt: Date;
  /** The image route, when an image engine runs. */
  images?: ImageService;
  /** Set when the engine has died. */
  deadReason?: string;
}
