// A kafkajs group consumer for the tests: subscribes to one topic and commits each record after reading
// it. One JSON line per event on stdout, as java/GroupConsumer.java: {"event":"assigned","partitions":[...]},
// {"event":"record","partition":p,"offset":o,"value":"..."}, {"event":"committed"}, {"event":"error",...},
// {"event":"closed"}. A line "close" on stdin (or its end) disconnects (the member leaves the group).
//
// Arguments: bootstrap group topic client-id
// The assigner is kafkajs' round robin under the protocol name librdkafka and the Java client give it
// ("roundrobin"), so a kafkajs member can share a group with theirs.
'use strict'
const readline = require('readline')
const { Kafka, logLevel, PartitionAssigners } = require('kafkajs')

const [bootstrap, groupId, topic, clientId] = process.argv.slice(2)
const emit = event => process.stdout.write(JSON.stringify(event) + '\n')
const roundrobin = config => ({ ...PartitionAssigners.roundRobin(config), name: 'roundrobin' })

const kafka = new Kafka({
  clientId,
  brokers: [bootstrap],
  logLevel: logLevel.WARN,
  logCreator: () => ({ level, log }) => process.stderr.write(`${level} ${log.message}\n`),
})
const consumer = kafka.consumer({ groupId, partitionAssigners: [roundrobin], sessionTimeout: 6000, heartbeatInterval: 500 })

consumer.on(consumer.events.GROUP_JOIN, e => {
  const partitions = e.payload.memberAssignment[topic] || []
  emit({ event: 'assigned', partitions })
})
consumer.on(consumer.events.CRASH, e => emit({ event: 'error', message: String(e.payload.error) }))

let closing = false
async function close () {
  if (closing) return
  closing = true
  await consumer.disconnect()
  emit({ event: 'closed' })
  process.exit(0)
}

async function main () {
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      emit({ event: 'record', partition, offset: Number(message.offset), value: message.value.toString() })
      await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }])
      emit({ event: 'committed' })
    },
  })
}

readline.createInterface({ input: process.stdin }).on('line', line => { if (line.trim() === 'close') close() }).on('close', close)
main().catch(e => { emit({ event: 'error', message: String(e) }); process.exit(1) })
