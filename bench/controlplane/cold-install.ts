import { install } from '@opkit/controlplane';

await install();
