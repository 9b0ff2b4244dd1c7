import { connect } from '@nats-io/transport-node';
import { PrivateNats } from '/work/main/test/support/private-nats.ts';
const nats = await PrivateNats.start();
const nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
(async () => { for await (const s of nc.status()) console.log('status', s.type); })();
await nats.restart();
await new Promise((r) => setTimeout(r, 3000));
await nc.close(); await nats.kill();
