/** Everything the routes share: the base, its renderer and temperatures, the engine, and the engine's state. */
import { EngineLike } from '../answering/engine-like';
import { Temperatures } from '../rendering/profile';
import { Renderer } from '../rendering/renderer';
import { ResolvedBase } from './bases';

export interface Service {
  base: ResolvedBase;
  servedName: string;
  renderer: Renderer;
  temperatures: Temperatures;
  engine: EngineLike;
  engineInfo: { format: string; architecture: string; dtype: string; storedDtype: string; contextLimit: number; blockSize: number; threads: number; vocabSize: number };
  engineProcess: { pid: number | null; where: string };
  debugReadout: boolean;
  startedAt: Date;
  /** Set when the engine has died. */
  deadReason?: string;
}
