/** The Services: headless, read-write, and read-only with replicas > 1. */
import { Services } from '@opkit/runtime';
import { headlessService, readOnlyService, readWriteService } from '../desired/index.ts';
import { allInOrder, type Run } from '../run.ts';

export async function ensureServices(run: Run): Promise<void> {
  const ro = readOnlyService(run.spec);
  await allInOrder([
    run.ensure(Services, headlessService(run.spec)),
    run.ensure(Services, readWriteService(run.spec)),
    ro ? run.ensure(Services, ro) : run.remove(Services, `${run.db.metadata.name}-ro`),
  ]);
}
