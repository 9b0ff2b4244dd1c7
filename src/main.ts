// Entry point of `npm start`. Node caches what it compiled (the type-stripped sources too) on
// disk, in the system's temporary directory: from the second start on, a process is up in
// about half the time. The cache must be on before the service's modules load, so they are
// imported only after it.
import { enableCompileCache } from 'node:module';

enableCompileCache();
const { main } = await import('./runtime/service-main.ts');
await main();
