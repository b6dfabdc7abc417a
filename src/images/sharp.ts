/**
 * sharp (libvips), loaded with the first image it reads: a server that is never sent an image does not pay for loading
 * it (about 50 ms of every start, on the path to ready). An image engine's process and a server with --image-model
 * load it once ready instead, so that their first image does not wait for it.
 */
import type Sharp from 'sharp';

let loading: Promise<typeof Sharp> | undefined;

export function loadSharp(): Promise<typeof Sharp> {
  return (loading ??= import('sharp').then((m) => m.default));
}
