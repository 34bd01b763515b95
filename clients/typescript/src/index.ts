/**
 * @memfleet/client: hand chat sessions over to memfleet, follow their memory,
 * read the commit events. Redis mode (MemfleetRedisClient) speaks the Redis
 * protocol (docs/protocol.md) directly; HTTP mode (MemfleetHttpClient) goes
 * through the memory API with a service key. Both raise the same errors. A fleet
 * with several Redis primaries: MemfleetShardedRedisClient, routed by the user.
 */
export { MemfleetRedisClient } from "./redis_client.js";
export { MemfleetShardedRedisClient } from "./sharded_redis_client.js";
export type {
  ShardedRedisClientOptions,
  ShardEventsQuery,
  ShardTarget,
} from "./sharded_redis_client.js";
export type { HandoverOptions, RedisClientOptions, WaitOptions } from "./redis_client.js";
export { MemfleetHttpClient } from "./http_client.js";
export type {
  HttpClientOptions,
  KnownFacts,
  KnownFactsQuery,
  ReadScope,
  SearchHit,
  SearchQuery,
  SessionStatusWithTag,
} from "./http_client.js";
export {
  AccessDenied,
  ConfigurationError,
  HandoverBacklogFull,
  HandoverTooLarge,
  HandoverUnavailable,
  InvalidHandover,
  LongPollRefused,
  LongPollsFull,
  MemfleetError,
  SessionBytesFull,
  TooManyLongPolls,
  UserSessionsFull,
} from "./errors.js";
export type { ErrorKind } from "./errors.js";
export { DEFAULT_LIMITS } from "./limits.js";
export type { Limits } from "./limits.js";
export { sessionTag } from "./protocol/session_tag.js";
export { HOLD, ShardMap, shardFor, shardScore, STAY } from "./protocol/shards.js";
export type { Route, ShardMode } from "./protocol/shards.js";
export { covers, eventCovers } from "./types.js";
export type {
  CommitEvent,
  EventsQuery,
  HandoverRequest,
  HandoverResult,
  Message,
  Role,
  SessionRef,
  SessionStatus,
} from "./types.js";
