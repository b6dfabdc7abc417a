/**
 * The project's root folder, from this file's place: src/common/ under ts-node, dist/common/ when
 * compiled; both two levels down. The addon (build/), the generated models (models/), the npm
 * tokenizers (node_modules/) and the playground's static files (src/server/playground/) are found from it.
 */
import * as path from 'path';

export const projectRoot = path.resolve(__dirname, '..', '..');
