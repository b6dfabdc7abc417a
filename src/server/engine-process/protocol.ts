/** Messages between the server and its engine process (Node IPC, advanced serialization). */
import { NativeEngineInfo, NativeLoadOptions } from '../../engine/native';
import { EngineCall, EngineReply } from '../../answering/engine-like';

export type HostMessage =
  | { kind: 'ready'; info: NativeEngineInfo; torchVersion?: string }
  | { kind: 'fatal'; error: WireError }
  | { kind: 'reply'; id: number; reply: EngineReply }
  | { kind: 'error'; id: number; error: WireError };

export type ServerMessage = { kind: 'answer'; id: number; call: EngineCall };

export interface WireError {
  code: string;
  message: string;
  details: Record<string, number>;
}

export interface HostArgs {
  load: NativeLoadOptions;
}
