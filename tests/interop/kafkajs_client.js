// KafkaJS scenarios against a kafkapy broker, for tests/interop/test_kafkajs.py.
// Usage: node kafkajs_client.js <scenario> <bootstrap> [json options] (bootstrap: host:port[,host:port...])
// Prints one JSON object on stdout (what the scenario saw); exits 1 with a one-line error otherwise.
// KafkaJS speaks its own, older versions of most APIs (Produce v7, Fetch v11, JoinGroup v5...),
// so these scenarios exercise version paths the librdkafka and kafka-python tests do not.
'use strict'
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { Kafka, CompressionTypes, logLevel, ConfigResourceTypes, AclResourceTypes, AclOperationTypes,
  AclPermissionTypes, ResourcePatternTypes } = require('kafkajs')

const [scenario, bootstrap, rawOptions] = process.argv.slice(2)
const options = rawOptions ? JSON.parse(rawOptions) : {}
const TIMEOUT_MS = 20000

function client (extra = {}) {
  return new Kafka({ clientId: 'kafkapy-kafkajs', brokers: bootstrap.split(','), logLevel: logLevel.NOTHING,
    connectionTimeout: 5000, requestTimeout: 10000, retry: { retries: 3 }, ...extra })
}

function decoded (message, partition) {
  const headers = {}
  for (const [name, value] of Object.entries(message.headers || {})) headers[name] = value === null ? null : value.toString()
  return { partition, offset: Number(message.offset), key: message.key === null ? null : message.key.toString(),
    value: message.value === null ? null : message.value.toString(), headers }
}

// Consume with a group until `count` messages arrived (or the timeout), then disconnect.
async function consumeAll (kafka, topic, groupId, count, consumerOptions = {}) {
  const consumer = kafka.consumer({ groupId, ...consumerOptions })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const seen = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out with ${seen.length} of ${count} messages`)), TIMEOUT_MS)
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        seen.push(decoded(message, partition))
        if (seen.length >= count) { clearTimeout(timer); resolve() }
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  return seen
}

const scenarios = {
  // Produce with and without gzip (KafkaJS's one built-in codec), keys, headers, a null key and a
  // null value; consume it back in a group; read the group's committed offsets.
  async roundtrip () {
    const kafka = client()
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({ topics: [{ topic: options.topic, numPartitions: 3 }], waitForLeaders: true })
    const producer = kafka.producer({ idempotent: options.idempotent === true, maxInFlightRequests: 1 })
    await producer.connect()
    const sent = []
    for (const [codec, compression] of [['gzip', CompressionTypes.GZIP], ['none', CompressionTypes.None]]) {
      const messages = []
      for (let i = 0; i < 20; i++) {
        messages.push({ partition: i % 3, key: `${codec}-k${i}`, value: `${codec}-v${i}`, headers: { codec, index: String(i) } })
      }
      messages.push({ partition: 0, key: null, value: `${codec}-keyless` })
      messages.push({ partition: 1, key: `${codec}-tombstone`, value: null })
      await producer.send({ topic: options.topic, messages, compression, acks: -1 })
      sent.push(...messages.map(m => ({ partition: m.partition, key: m.key, value: m.value, headers: m.headers || {} })))
    }
    await producer.disconnect()
    const consumed = await consumeAll(kafka, options.topic, options.group, sent.length)
    const committed = await admin.fetchOffsets({ groupId: options.group, topics: [options.topic] })
    const ends = await admin.fetchTopicOffsets(options.topic)
    await admin.disconnect()
    return { sent, consumed, committed: committed[0].partitions.map(p => [p.partition, Number(p.offset)]),
      ends: ends.map(p => [p.partition, Number(p.high), Number(p.low)]) }
  },

  // Two consumers share a 4-partition topic's partitions; when one leaves, the other owns all.
  async group () {
    const kafka = client()
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({ topics: [{ topic: options.topic, numPartitions: 4 }], waitForLeaders: true })
    const assignments = {}
    const consumers = ['a', 'b'].map(name => {
      const consumer = kafka.consumer({ groupId: options.group, sessionTimeout: 10000, rebalanceTimeout: 10000,
        heartbeatInterval: 300 })
      consumer.on(consumer.events.GROUP_JOIN, event => {
        assignments[name] = (event.payload.memberAssignment[options.topic] || []).slice().sort()
      })
      return consumer
    })
    const settled = () => {
      const owned = Object.values(assignments)
      return owned.length === 2 && owned.flat().sort().join() === '0,1,2,3' && owned.every(p => p.length === 2)
    }
    for (const consumer of consumers) {
      await consumer.connect()
      await consumer.subscribe({ topic: options.topic, fromBeginning: true })
      await consumer.run({ eachMessage: async () => {} })
    }
    const deadline = Date.now() + TIMEOUT_MS
    while (!settled() && Date.now() < deadline) await new Promise(resolve => setTimeout(resolve, 100))
    const both = JSON.parse(JSON.stringify(assignments))
    delete assignments.a
    await consumers[0].disconnect()
    while (!(assignments.b && assignments.b.length === 4 && !assignments.a) && Date.now() < deadline) {
      await new Promise(resolve => setTimeout(resolve, 100))
    }
    const described = await admin.describeGroups([options.group])
    await consumers[1].disconnect()
    await admin.disconnect()
    const group = described.groups[0]
    return { both, alone: assignments.b, state: group.state, protocol: group.protocol, members: group.members.length }
  },

  // A committed and an aborted transaction (with offsets sent to a group in the committed one);
  // read_committed and read_uncommitted consumers read the topic back.
  async transactions () {
    const kafka = client()
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({ topics: [{ topic: options.topic, numPartitions: 2 }], waitForLeaders: true })
    const producer = kafka.producer({ transactionalId: options.transactionalId, idempotent: true, maxInFlightRequests: 1 })
    await producer.connect()
    const committed = await producer.transaction()
    await committed.send({ topic: options.topic, messages: [{ partition: 0, value: 'committed-0' }, { partition: 1, value: 'committed-1' }] })
    await committed.sendOffsets({ consumerGroupId: options.offsetsGroup, topics: [{ topic: options.topic, partitions: [{ partition: 0, offset: '1' }] }] })
    await committed.commit()
    const aborted = await producer.transaction()
    await aborted.send({ topic: options.topic, messages: [{ partition: 0, value: 'aborted-0' }, { partition: 1, value: 'aborted-1' }] })
    await aborted.abort()
    const after = await producer.transaction()
    await after.send({ topic: options.topic, messages: [{ partition: 0, value: 'after-0' }] })
    await after.commit()
    await producer.disconnect()
    const readCommitted = await consumeAll(kafka, options.topic, `${options.topic}-rc`, 3)
    const readUncommitted = await consumeAll(kafka, options.topic, `${options.topic}-ru`, 5, { readUncommitted: true })
    const offsets = await admin.fetchOffsets({ groupId: options.offsetsGroup, topics: [options.topic] })
    await admin.disconnect()
    const values = seen => seen.map(m => m.value).sort()
    return { readCommitted: values(readCommitted), readUncommitted: values(readUncommitted),
      sentOffsets: offsets[0].partitions.map(p => [p.partition, Number(p.offset)]) }
  },

  // The admin client's other calls: partitions, configs, offsets by time, deleting records, groups.
  async admin () {
    const kafka = client()
    const admin = kafka.admin()
    await admin.connect()
    const topic = options.topic
    await admin.createTopics({ topics: [{ topic, numPartitions: 1, configEntries: [{ name: 'retention.ms', value: '3600000' }] }], waitForLeaders: true })
    await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] })
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
    const producer = kafka.producer()
    await producer.connect()
    const before = Date.now()
    await producer.send({ topic, messages: [0, 1, 2, 3].map(i => ({ partition: 0, value: `v${i}`, timestamp: String(before + i * 1000) })) })
    await producer.disconnect()
    await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '2' }] })
    await admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] }] })
    const described = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['cleanup.policy', 'retention.ms'] }] })
    const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, before + 1500)
    // cleanup.policy compact alone: DeleteRecords is refused (POLICY_VIOLATION), as in Kafka
    let refusedDelete = null
    try {
      await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '3' }] })
    } catch (e) {
      const cause = e.partitions ? e : e.cause
      refusedDelete = cause && cause.partitions ? cause.partitions.map(p => p.error.type) : [e.name, e.message]
    }
    const afterDelete = await admin.fetchTopicOffsets(topic)
    const cluster = await admin.describeCluster()
    await admin.deleteTopics({ topics: [topic] })
    const topics = await admin.listTopics()
    await admin.disconnect()
    return {
      partitions: metadata.topics[0].partitions.length,
      configs: Object.fromEntries(described.resources[0].configEntries.map(e => [e.configName, e.configValue])),
      byTime: byTime.filter(p => p.partition === 0).map(p => Number(p.offset)),
      afterDelete: afterDelete.filter(p => p.partition === 0).map(p => [Number(p.low), Number(p.high)]),
      refusedDelete,
      brokers: cluster.brokers.length,
      controller: cluster.controller,
      topicListed: topics.includes(topic)
    }
  },

  // ACLs through KafkaJS's admin (a super user), and what they do to another user's produce.
  async acls () {
    const login = (username, password) => client({ sasl: { mechanism: 'plain', username, password },
      retry: { retries: 0 } })
    const admin = login('admin', 'admin-secret').admin()
    await admin.connect()
    await admin.createTopics({ topics: [{ topic: options.topic, numPartitions: 1 }], waitForLeaders: true })
    const produce = async () => {
      const producer = login('alice', 'alice-secret').producer()
      await producer.connect()
      try {
        await producer.send({ topic: options.topic, messages: [{ value: 'from alice' }] })
        return 'NONE'
      } catch (error) {
        const cause = error.cause || error
        return cause.type || `${cause.name}: ${cause.message}`
      } finally {
        await producer.disconnect()
      }
    }
    const before = await produce()
    const acl = { resourceType: AclResourceTypes.TOPIC, resourceName: options.topic.slice(0, 3),
      resourcePatternType: ResourcePatternTypes.PREFIXED, principal: 'User:alice', host: '*',
      operation: AclOperationTypes.WRITE, permissionType: AclPermissionTypes.ALLOW }
    await admin.createAcls({ acl: [acl] })
    const after = await produce()
    const described = await admin.describeAcls({ resourceType: AclResourceTypes.ANY,
      resourcePatternType: ResourcePatternTypes.ANY, operation: AclOperationTypes.ANY,
      permissionType: AclPermissionTypes.ANY })
    const deleted = await admin.deleteAcls({ filters: [acl] })
    const afterDelete = await produce()
    await admin.disconnect()
    return {
      before, after, afterDelete,
      described: described.resources.map(r => [r.resourceType, r.resourceName, r.resourcePatternType,
        r.acls.map(a => [a.principal, a.host, a.operation, a.permissionType])]),
      deleted: deleted.filterResponses.map(f => [f.errorCode, f.matchingAcls.length])
    }
  },

  // KIP-455 through KafkaJS's admin: partition 0 moves from brokers [1, 2] to [2, 3] between two
  // sends of one producer; both sends are read back; a broker that is not registered is refused.
  async reassign () {
    const kafka = client()
    const admin = kafka.admin()
    await admin.connect()
    const topic = options.topic
    const placement = async () => {
      const [found] = (await admin.fetchTopicMetadata({ topics: [topic] })).topics
      return found.partitions.map(p => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas }))
    }
    await admin.createTopics({ topics: [{ topic, replicaAssignment: [{ partition: 0, replicas: [1, 2] }] }],
      waitForLeaders: true })
    const producer = kafka.producer()
    await producer.connect()
    const send = async (label) => producer.send({ topic,
      messages: [0, 1, 2, 3, 4].map(i => ({ partition: 0, value: `${label}-${i}` })) })
    await send('before')
    const before = await placement()
    await admin.alterPartitionReassignments({ topics: [{ topic, partitionAssignment: [{ partition: 0, replicas: [2, 3] }] }] })
    const listedAll = await admin.listPartitionReassignments({})
    const listedNamed = await admin.listPartitionReassignments({ topics: [{ topic, partitions: [0] }] })
    const after = await placement()
    await send('after')  // the producer still knows broker 1 as the leader: it is refused and looks again
    await producer.disconnect()
    let refused = null
    try {
      await admin.alterPartitionReassignments({ topics: [{ topic, partitionAssignment: [{ partition: 0, replicas: [2, 9] }] }] })
    } catch (error) {
      const cause = error.errors ? error.errors[0] : error
      refused = cause.type || `${cause.name}: ${cause.message}`
    }
    await admin.disconnect()
    const consumed = await consumeAll(kafka, topic, `${topic}-g`, 10)
    return { before, after, listedAll: listedAll.topics, listedNamed: listedNamed.topics, refused,
      values: consumed.map(m => m.value) }
  },

  // SASL: the mechanism and credentials given produce and consume; wrong credentials are refused.
  async sasl () {
    const sasl = { mechanism: options.mechanism, username: options.username, password: options.password }
    const kafka = client({ sasl, retry: { retries: options.retries === undefined ? 3 : options.retries } })
    const producer = kafka.producer()
    try {
      await producer.connect()
      await producer.send({ topic: options.topic, messages: [{ value: 'over-sasl' }] })
    } catch (error) {
      return { error: error.name, message: error.message }
    }
    await producer.disconnect()
    const consumed = await consumeAll(kafka, options.topic, `${options.topic}-g`, 1)
    return { values: consumed.map(m => m.value) }
  }
}

const run = scenarios[scenario]
if (!run) {
  console.error(`unknown scenario ${scenario}`)
  process.exit(2)
}
run().then(result => {
  process.stdout.write(JSON.stringify(result) + '\n')
  process.exit(0)
}, error => {
  console.error(`${scenario} failed: ${error.name}: ${error.message}`)
  process.exit(1)
})
