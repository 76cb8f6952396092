// The peer payhook bench measures side by side: stripe-sync-engine
// (@supabase/stripe-sync-engine) behind a node:http server, doing what its
// own app does with a webhook: read the raw body, hand it and the
// Stripe-Signature header to processWebhook, which verifies the signature
// with the stripe library and upserts the event's object into PostgreSQL
// before the answer; answer 200 {"received":true} after that, and 400
// "Webhook Error: ..." for any error, as the engine's own Fastify app
// (apps/node-fastify, its /webhooks route) does.
//
//   node server.js migrate        run stripe-sync-engine's migrations (schema "stripe")
//   node server.js serve          serve POST /webhooks (any path) until SIGTERM
//
// Environment:
//   PEER_DATABASE_URL   postgres://... (required)
//   PEER_WEBHOOK_SECRET the whsec_... secret deliveries are signed with (serve)
//   PEER_PORT           port on 127.0.0.1 (default 0: any free one)
//   PEER_POOL_MAX       PostgreSQL connections (default 10, the engine's own default)
//   PEER_STRIPE_PORT    port on 127.0.0.1 the engine's Stripe API client talks to
//                       (default 9, where nothing listens). The events payhook bench
//                       sends (payment_intent.succeeded, status succeeded) are in a
//                       final state, which the engine stores from the payload alone:
//                       no API call is made, and if one were it would fail on
//                       loopback rather than reach the internet.
//
// serve prints one line, "listening http://127.0.0.1:PORT/webhooks", once it accepts
// connections.
//
// CommonJS: the package's ES module build uses __dirname to find its
// migrations and fails with "ReferenceError: __dirname is not defined"
// (0.48.5); its CommonJS build works.
'use strict'
const http = require('node:http')
const process = require('node:process')
const pg = require('pg')
const Stripe = require('stripe')
const { StripeSync, runMigrations } = require('@supabase/stripe-sync-engine')

const env = (name, def) => {
  const v = process.env[name]
  if (v === undefined || v === '') {
    if (def === undefined) {
      console.error(`peer: ${name} is required`)
      process.exit(2)
    }
    return def
  }
  return v
}

const databaseUrl = env('PEER_DATABASE_URL')
const logger = {
  info() {},
  warn(...a) { console.error('peer:', ...a) },
  error(...a) { console.error('peer:', ...a) },
}

async function migrate() {
  // runMigrations logs its errors instead of throwing them: check the result.
  let failed = false
  await runMigrations({
    databaseUrl,
    schema: 'stripe',
    logger: { ...logger, error(...a) { failed = true; logger.error(...a) } },
  })
  const c = new pg.Client({ connectionString: databaseUrl })
  await c.connect()
  try {
    const r = await c.query(`SELECT to_regclass('stripe.payment_intents') AS t, (SELECT count(*) FROM stripe.migrations) AS n`)
    if (failed || !r.rows[0].t) {
      throw new Error('migrations did not create stripe.payment_intents')
    }
    console.error(`peer: schema stripe migrated (${r.rows[0].n} migrations)`)
  } finally {
    await c.end()
  }
}

function serve() {
  const sync = new StripeSync({
    poolConfig: { connectionString: databaseUrl, max: Number(env('PEER_POOL_MAX', '10')) },
    stripeSecretKey: 'sk_test_payhook_bench_peer',
    stripeWebhookSecret: env('PEER_WEBHOOK_SECRET'),
    logger,
  })
  // The Stripe API client, pointed at loopback (see the header).
  sync.stripe = new Stripe('sk_test_payhook_bench_peer', {
    host: '127.0.0.1',
    port: Number(env('PEER_STRIPE_PORT', '9')),
    protocol: 'http',
    maxNetworkRetries: 0,
    timeout: 5000,
  })

  const server = http.createServer((req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405).end()
      return
    }
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', async () => {
      const body = Buffer.concat(chunks)
      try {
        await sync.processWebhook(body, req.headers['stripe-signature'])
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"received":true}')
      } catch (err) {
        const msg = err instanceof Error ? err.message : 'Unknown error'
        if (!(err && err.type === 'StripeSignatureVerificationError')) logger.error(msg)
        res.writeHead(400, { 'content-type': 'text/plain' }).end(`Webhook Error: ${msg}`)
      }
    })
  })
  server.keepAliveTimeout = 60000
  server.listen(Number(env('PEER_PORT', '0')), '127.0.0.1', () => {
    console.log(`listening http://127.0.0.1:${server.address().port}/webhooks`)
  })
  const stop = () => server.close(() => sync.close().then(() => process.exit(0)))
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}

switch (process.argv[2]) {
  case 'migrate':
    migrate().catch((err) => { console.error('peer: migrate:', err.message); process.exit(1) })
    break
  case 'serve':
    serve()
    break
  default:
    console.error('usage: node server.js migrate|serve')
    process.exit(2)
}
