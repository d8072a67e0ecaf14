/** The slow, cached part of real nodes, done in the foreground (progress on the terminal) before `up`. */
import { ensureImage } from '../images/build.ts';
import { PAUSE_IMAGE, SHELL_IMAGE } from '../images/recipes.ts';
import { installNode } from '../install/install.ts';
import { checkNodePrerequisites } from './prereqs.ts';

export async function prepareRealNodeHost(log: (line: string) => void, images: string[] = []): Promise<void> {
  checkNodePrerequisites();
  await installNode({ log });
  for (const image of new Set([PAUSE_IMAGE, SHELL_IMAGE, ...images])) await ensureImage(image, log);
}
