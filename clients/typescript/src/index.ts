/**
 * @memfleet/client: hand chat sessions over to memfleet, follow their memory,
 * read the commit events. Redis mode (MemfleetRedisClient) speaks the Redis
 * protocol (docs/protocol.md) directly; HTTP mode (MemfleetHttpClient) goes
 * through the memory API with a service key or a user's token, and reads and
 * administers a user's memory too. Both raise the same errors. A fleet
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
export type { HttpClientOptions, SessionStatusWithTag, UserToken } from "./http_client.js";
export type {
  ActiveFacts,
  Basis,
  Category,
  CategoryGroup,
  Consent,
  ConsentChanged,
  ConsentChoice,
  Erased,
  ExportFact,
  ExportRun,
  ExportSession,
  Fact,
  FactChain,
  FactCorrection,
  FactScope,
  FactsQuery,
  HeldAnswer,
  HeldProposal,
  KnownFacts,
  KnownFactsQuery,
  Moment,
  NewFact,
  NewPerson,
  Person,
  PersonChanges,
  PersonWithFacts,
  PromptBlocks,
  PromptBlocksQuery,
  ProposalState,
  ReadScope,
  SearchHit,
  SearchQuery,
  SourceKind,
  StableBlock,
  SupersededReason,
  UserExport,
  UserPortrait,
  Via,
  VolatileBlock,
  WrittenVia,
} from "./http/memory_types.js";
export type { Note, NoteHit, NoteReason, NoteState, SearchResults } from "./http/note_types.js";
export {
  AccessDenied,
  ConfigurationError,
  WriteConflict,
  MemoryOff,
  HandoverBacklogFull,
  HandoverTooLarge,
  HandoverUnavailable,
  InvalidHandover,
  InvalidRequest,
  LongPollRefused,
  LongPollsFull,
  MemfleetError,
  MemoryApiError,
  MemoryApiUnavailable,
  NotFound,
  RateLimited,
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
export { portraitTag } from "./http/memory_types.js";
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
export {
  MemoryToolExecutor,
  memoryToolDefinitions,
  memoryTools,
  ToolArgumentsError,
  validateToolArguments,
} from "./tools.js";
export type {
  JsonSchemaProperty,
  MemoryToolDefinition,
  MemoryToolName,
  MemoryToolScope,
} from "./tools.js";
