// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// Chainlink CCIP 1.6 test contracts, written after the public behaviour of chainlink-ccip's Router,
/// OnRamp, FeeQuoter and OffRamp (docs/ccip-lane.md lists the rules and where each comes from):
/// - Router.ccipSend: an unsupported destination selector reverts UnsupportedDestinationChain; with
///   feeToken 0 the fee is quoted in wrapped native, msg.value must be at least the fee (else
///   InsufficientFeeTokenAmount) and the whole msg.value is taken, no refund; with a fee token
///   msg.value must be 0 (InvalidMsgValue) and exactly getFee() is pulled with transferFrom; each
///   token amount is pulled with transferFrom from the caller into the token's pool;
/// - the fee quote checks the receiver (32 bytes, an EVM address), the fee token, the extraArgs tag
///   (empty, EVMExtraArgsV1 0x97a657c9 or EVMExtraArgsV2 0x181dcf10, else InvalidExtraArgsTag), the
///   gas limit (MessageGasLimitTooHigh), out-of-order execution where the lane enforces it, and each
///   token's pool;
/// - the OnRamp emits CCIPMessageSent(destChainSelector, sequenceNumber, EVM2AnyRampMessage) whose
///   header carries the messageId; the sequence number counts per destination, the nonce is 0 for an
///   out-of-order message;
/// - the OffRamp records the MessageExecutionState per (source selector, sequence number): token
///   release and the receiver's ccipReceive share one try, so FAILURE delivers no tokens; the
///   receiver is called only when it has code, supports the ccipReceive interface and the message has
///   data or a gas limit; ExecutionStateChanged carries the state.
/// What is emulated, not copied: the commit and execution DONs (merkle roots, RMN, OCR reports) are
/// one trusted transmitter (test/emulators/ccip-offramp.ts), which alone may execute a message, once.

struct EVMTokenAmount {
    address token;
    uint256 amount;
}

struct EVM2AnyMessage {
    bytes receiver;
    bytes data;
    EVMTokenAmount[] tokenAmounts;
    address feeToken;
    bytes extraArgs;
}

struct Any2EVMMessage {
    bytes32 messageId;
    uint64 sourceChainSelector;
    bytes sender;
    bytes data;
    EVMTokenAmount[] destTokenAmounts;
}

struct RampMessageHeader {
    bytes32 messageId;
    uint64 sourceChainSelector;
    uint64 destChainSelector;
    uint64 sequenceNumber;
    uint64 nonce;
}

struct EVM2AnyTokenTransfer {
    address sourcePoolAddress;
    bytes destTokenAddress;
    bytes extraData;
    uint256 amount;
    bytes destExecData;
}

struct EVM2AnyRampMessage {
    RampMessageHeader header;
    address sender;
    bytes data;
    bytes receiver;
    bytes extraArgs;
    address feeToken;
    uint256 feeTokenAmount;
    uint256 feeValueJuels;
    EVM2AnyTokenTransfer[] tokenAmounts;
}

struct Any2EVMTokenTransfer {
    bytes sourcePoolAddress;
    address destTokenAddress;
    uint32 destGasAmount;
    bytes extraData;
    uint256 amount;
}

struct Any2EVMRampMessage {
    RampMessageHeader header;
    bytes sender;
    bytes data;
    address receiver;
    uint256 gasLimit;
    Any2EVMTokenTransfer[] tokenAmounts;
}

interface ICcipToken {
    function transferFrom(address from, address to, uint256 value) external returns (bool);
    function transfer(address to, uint256 value) external returns (bool);
    function mint(address to, uint256 value) external;
}

interface ITestOnRamp {
    function getFee(uint64 destChainSelector, EVM2AnyMessage calldata message) external view returns (uint256);
    function getPoolBySourceToken(uint64 destChainSelector, address token) external view returns (address);
    function forwardFromRouter(uint64 destChainSelector, EVM2AnyMessage calldata message, uint256 feeTokenAmount, address originalSender) external returns (bytes32);
}

interface ITestTokenAdminRegistry {
    function getPool(address token) external view returns (address);
}

interface IAny2EVMMessageReceiver {
    function ccipReceive(Any2EVMMessage calldata message) external;
}

interface IERC165 {
    function supportsInterface(bytes4 interfaceId) external view returns (bool);
}

/// The Router as a sender sees it: getFee, ccipSend, isChainSupported, getOnRamp.
contract TestCcipRouter {
    address public immutable owner;
    address public immutable wrappedNative;
    mapping(uint64 => address) internal s_onRamps;

    error UnsupportedDestinationChain(uint64 destChainSelector);
    error InsufficientFeeTokenAmount();
    error InvalidMsgValue();
    error OnlyOwner();
    error UnsupportedToken(address token);
    error TransferFailed();

    event OnRampSet(uint64 indexed destChainSelector, address onRamp);

    constructor(address wrappedNative_) {
        owner = msg.sender;
        wrappedNative = wrappedNative_;
    }

    function typeAndVersion() external pure returns (string memory) {
        return "Router 1.2.0";
    }

    /// address(0) takes the lane down: the destination is no longer supported.
    function setOnRamp(uint64 destChainSelector, address onRamp) external {
        if (msg.sender != owner) revert OnlyOwner();
        s_onRamps[destChainSelector] = onRamp;
        emit OnRampSet(destChainSelector, onRamp);
    }

    function getOnRamp(uint64 destChainSelector) external view returns (address) {
        return s_onRamps[destChainSelector];
    }

    function isChainSupported(uint64 chainSelector) external view returns (bool) {
        return s_onRamps[chainSelector] != address(0);
    }

    function getWrappedNative() external view returns (address) {
        return wrappedNative;
    }

    function getFee(uint64 destinationChainSelector, EVM2AnyMessage memory message) external view returns (uint256 fee) {
        if (message.feeToken == address(0)) message.feeToken = wrappedNative;
        address onRamp = s_onRamps[destinationChainSelector];
        if (onRamp == address(0)) revert UnsupportedDestinationChain(destinationChainSelector);
        return ITestOnRamp(onRamp).getFee(destinationChainSelector, message);
    }

    function ccipSend(uint64 destinationChainSelector, EVM2AnyMessage memory message) external payable returns (bytes32) {
        address onRamp = s_onRamps[destinationChainSelector];
        if (onRamp == address(0)) revert UnsupportedDestinationChain(destinationChainSelector);
        uint256 feeTokenAmount;
        if (message.feeToken == address(0)) {
            // Quoted as wrapped native; the whole msg.value is taken, whatever is above the fee too.
            message.feeToken = wrappedNative;
            feeTokenAmount = ITestOnRamp(onRamp).getFee(destinationChainSelector, message);
            if (msg.value < feeTokenAmount) revert InsufficientFeeTokenAmount();
            feeTokenAmount = msg.value;
            (bool ok, ) = onRamp.call{value: msg.value}("");
            if (!ok) revert TransferFailed();
        } else {
            if (msg.value > 0) revert InvalidMsgValue();
            feeTokenAmount = ITestOnRamp(onRamp).getFee(destinationChainSelector, message);
            if (!ICcipToken(message.feeToken).transferFrom(msg.sender, onRamp, feeTokenAmount)) revert TransferFailed();
        }
        for (uint256 i = 0; i < message.tokenAmounts.length; ++i) {
            address pool = ITestOnRamp(onRamp).getPoolBySourceToken(destinationChainSelector, message.tokenAmounts[i].token);
            if (pool == address(0)) revert UnsupportedToken(message.tokenAmounts[i].token);
            if (!ICcipToken(message.tokenAmounts[i].token).transferFrom(msg.sender, pool, message.tokenAmounts[i].amount)) revert TransferFailed();
        }
        return ITestOnRamp(onRamp).forwardFromRouter(destinationChainSelector, message, feeTokenAmount, msg.sender);
    }
}

/// The OnRamp with its FeeQuoter: per destination fees, extraArgs rules and token pools; the
/// sequence numbers and the messageId.
contract TestCcipOnRamp {
    struct DestConfig {
        bool enabled;
        bool enforceOutOfOrder;
        uint32 maxGasLimit;
        uint64 sequenceNumber;
        uint256 baseFee;
        uint256 feePerByte;
        uint256 feePerToken;
        uint256 feePerGas;
    }

    struct PoolConfig {
        address pool;
        address destToken;
    }

    uint64 public immutable chainSelector;
    address public immutable router;
    address public immutable owner;
    uint32 public constant DEFAULT_GAS_LIMIT = 200_000;
    bytes4 public constant EVM_EXTRA_ARGS_V1_TAG = 0x97a657c9;
    bytes4 public constant GENERIC_EXTRA_ARGS_V2_TAG = 0x181dcf10;

    mapping(uint64 => DestConfig) public destConfigs;
    mapping(uint64 => mapping(address => PoolConfig)) internal s_pools;
    /// Fee token -> how many of its base units one wei of native fee costs, times 1e18 (0: not accepted).
    mapping(address => uint256) public feeTokenRate;
    mapping(uint64 => mapping(address => uint64)) public outboundNonce;
    /// Where a token's pool is looked up (as the 1.6 OnRamp does through its TokenAdminRegistry); unset: the pool of setPool.
    address public tokenAdminRegistry;

    event CCIPMessageSent(uint64 indexed destChainSelector, uint64 indexed sequenceNumber, EVM2AnyRampMessage message);

    error OnlyOwner();
    error MustBeCalledByRouter();
    error DestinationChainNotEnabled(uint64 destChainSelector);
    error InvalidEVMAddress(bytes encodedAddress);
    error FeeTokenNotSupported(address token);
    error InvalidExtraArgsTag();
    error MessageGasLimitTooHigh();
    error ExtraArgOutOfOrderExecutionMustBeTrue();
    error UnsupportedToken(address token);
    error CannotSendZeroTokens();

    constructor(uint64 chainSelector_, address router_) {
        chainSelector = chainSelector_;
        router = router_;
        owner = msg.sender;
    }

    receive() external payable {}

    function typeAndVersion() external pure returns (string memory) {
        return "OnRamp 1.6.0";
    }

    function setDestConfig(uint64 dest, bool enabled, bool enforceOutOfOrder, uint32 maxGasLimit, uint256 baseFee, uint256 feePerByte, uint256 feePerToken, uint256 feePerGas) external {
        if (msg.sender != owner) revert OnlyOwner();
        DestConfig storage c = destConfigs[dest];
        c.enabled = enabled;
        c.enforceOutOfOrder = enforceOutOfOrder;
        c.maxGasLimit = maxGasLimit;
        c.baseFee = baseFee;
        c.feePerByte = feePerByte;
        c.feePerToken = feePerToken;
        c.feePerGas = feePerGas;
    }

    function setFeeTokenRate(address token, uint256 rate) external {
        if (msg.sender != owner) revert OnlyOwner();
        feeTokenRate[token] = rate;
    }

    function setPool(uint64 dest, address token, address pool, address destToken) external {
        if (msg.sender != owner) revert OnlyOwner();
        s_pools[dest][token] = PoolConfig(pool, destToken);
    }

    function setTokenAdminRegistry(address registry) external {
        if (msg.sender != owner) revert OnlyOwner();
        tokenAdminRegistry = registry;
    }

    /// The pool the Router pays a token into for this destination: none unless the lane lists the
    /// token (setPool); with a TokenAdminRegistry, the pool registered there, so re-pointing it there
    /// re-points every send.
    function _poolOf(uint64 dest, address token) internal view returns (address) {
        address pool = s_pools[dest][token].pool;
        if (pool == address(0) || tokenAdminRegistry == address(0)) return pool;
        return ITestTokenAdminRegistry(tokenAdminRegistry).getPool(token);
    }

    function getPoolBySourceToken(uint64 dest, address token) external view returns (address) {
        return _poolOf(dest, token);
    }

    /// (gasLimit, allowOutOfOrderExecution) of the extraArgs, or the revert the FeeQuoter makes.
    function _extraArgs(uint64 dest, bytes memory extraArgs) internal view returns (uint256 gasLimit, bool outOfOrder) {
        DestConfig storage c = destConfigs[dest];
        if (extraArgs.length == 0) {
            gasLimit = DEFAULT_GAS_LIMIT;
        } else {
            if (extraArgs.length < 4) revert InvalidExtraArgsTag();
            bytes4 tag = bytes4(extraArgs);
            bytes memory body = new bytes(extraArgs.length - 4);
            for (uint256 i = 0; i < body.length; ++i) body[i] = extraArgs[i + 4];
            if (tag == GENERIC_EXTRA_ARGS_V2_TAG) {
                (gasLimit, outOfOrder) = abi.decode(body, (uint256, bool));
            } else if (tag == EVM_EXTRA_ARGS_V1_TAG) {
                gasLimit = abi.decode(body, (uint256));
            } else {
                revert InvalidExtraArgsTag();
            }
        }
        if (gasLimit > c.maxGasLimit) revert MessageGasLimitTooHigh();
        if (c.enforceOutOfOrder && !outOfOrder) revert ExtraArgOutOfOrderExecutionMustBeTrue();
    }

    function getFee(uint64 dest, EVM2AnyMessage calldata message) public view returns (uint256) {
        DestConfig storage c = destConfigs[dest];
        if (!c.enabled) revert DestinationChainNotEnabled(dest);
        if (message.receiver.length != 32 || uint256(bytes32(message.receiver)) > type(uint160).max) revert InvalidEVMAddress(message.receiver);
        uint256 rate = feeTokenRate[message.feeToken];
        if (rate == 0) revert FeeTokenNotSupported(message.feeToken);
        (uint256 gasLimit, ) = _extraArgs(dest, message.extraArgs);
        for (uint256 i = 0; i < message.tokenAmounts.length; ++i) {
            if (_poolOf(dest, message.tokenAmounts[i].token) == address(0)) revert UnsupportedToken(message.tokenAmounts[i].token);
            if (message.tokenAmounts[i].amount == 0) revert CannotSendZeroTokens();
        }
        uint256 nativeFee = c.baseFee + c.feePerByte * message.data.length + c.feePerToken * message.tokenAmounts.length + c.feePerGas * gasLimit;
        return (nativeFee * rate) / 1e18;
    }

    function forwardFromRouter(uint64 dest, EVM2AnyMessage calldata message, uint256 feeTokenAmount, address originalSender) external returns (bytes32) {
        if (msg.sender != router) revert MustBeCalledByRouter();
        DestConfig storage c = destConfigs[dest];
        if (!c.enabled) revert DestinationChainNotEnabled(dest);
        (, bool outOfOrder) = _extraArgs(dest, message.extraArgs);
        EVM2AnyRampMessage memory m;
        m.header.sourceChainSelector = chainSelector;
        m.header.destChainSelector = dest;
        m.header.sequenceNumber = ++c.sequenceNumber;
        m.header.nonce = outOfOrder ? 0 : ++outboundNonce[dest][originalSender];
        m.sender = originalSender;
        m.data = message.data;
        m.receiver = message.receiver;
        m.extraArgs = message.extraArgs;
        m.feeToken = message.feeToken;
        m.feeTokenAmount = feeTokenAmount;
        m.tokenAmounts = new EVM2AnyTokenTransfer[](message.tokenAmounts.length);
        for (uint256 i = 0; i < message.tokenAmounts.length; ++i) {
            PoolConfig memory p = s_pools[dest][message.tokenAmounts[i].token];
            m.tokenAmounts[i] = EVM2AnyTokenTransfer(_poolOf(dest, message.tokenAmounts[i].token), abi.encode(p.destToken), "", message.tokenAmounts[i].amount, "");
        }
        // A hash of the lane (source, destination, this ramp) and the message: unique per message.
        m.header.messageId = keccak256(abi.encode(keccak256(abi.encode("Any2EVMMessageHashV1", chainSelector, dest, address(this))), m));
        emit CCIPMessageSent(dest, m.header.sequenceNumber, m);
        return m.header.messageId;
    }
}

/// A token pool: locks on the source (what the Router sends it stays), releases or mints on the
/// destination when its OffRamp says so.
contract TestCcipTokenPool {
    address public immutable token;
    address public immutable owner;
    bool public immutable mints;
    address public offRamp;
    /// The remote chains this pool is configured for (TokenPool.isSupportedChain).
    mapping(uint64 => bool) internal s_supportedChains;

    error OnlyOffRamp();
    error OnlyOwner();

    constructor(address token_, bool mints_) {
        token = token_;
        mints = mints_;
        owner = msg.sender;
    }

    function typeAndVersion() external pure returns (string memory) {
        return "TestTokenPool 1.5.1";
    }

    function getToken() external view returns (address) {
        return token;
    }

    function setSupportedChain(uint64 remoteChainSelector, bool supported) external {
        if (msg.sender != owner) revert OnlyOwner();
        s_supportedChains[remoteChainSelector] = supported;
    }

    function isSupportedChain(uint64 remoteChainSelector) external view returns (bool) {
        return s_supportedChains[remoteChainSelector];
    }

    function setOffRamp(address offRamp_) external {
        if (msg.sender != owner) revert OnlyOwner();
        offRamp = offRamp_;
    }

    function releaseOrMint(address receiver, uint256 amount) external {
        if (msg.sender != offRamp) revert OnlyOffRamp();
        if (mints) ICcipToken(token).mint(receiver, amount);
        else require(ICcipToken(token).transfer(receiver, amount), "release");
    }
}

/// The TokenAdminRegistry as a sender's chain shows it: each token's pool (getPool), set by its owner.
contract TestCcipTokenAdminRegistry {
    address public immutable owner;
    mapping(address => address) internal s_pools;

    error OnlyOwner();

    event PoolSet(address indexed token, address previousPool, address newPool);

    constructor() {
        owner = msg.sender;
    }

    function typeAndVersion() external pure returns (string memory) {
        return "TokenAdminRegistry 1.5.0";
    }

    function setPool(address token, address pool) external {
        if (msg.sender != owner) revert OnlyOwner();
        emit PoolSet(token, s_pools[token], pool);
        s_pools[token] = pool;
    }

    function getPool(address token) external view returns (address) {
        return s_pools[token];
    }
}

/// The OffRamp as a receiving chain shows it: one execution per message, its state recorded.
contract TestCcipOffRamp {
    enum MessageExecutionState {
        UNTOUCHED,
        IN_PROGRESS,
        SUCCESS,
        FAILURE
    }

    uint64 public immutable chainSelector;
    address public immutable owner;
    /// The emulated execution DON: the only account whose reports this ramp executes.
    address public transmitter;
    mapping(uint64 => bytes) public sourceOnRamp;
    mapping(address => address) public poolOfToken;
    mapping(uint64 => mapping(uint64 => MessageExecutionState)) internal s_executionStates;
    /// The same state by messageId (what the lane's observer reads).
    mapping(bytes32 => MessageExecutionState) public executionStateOf;

    bytes4 public constant CCIP_RECEIVE_INTERFACE = 0x85572ffb;

    event ExecutionStateChanged(uint64 indexed sourceChainSelector, uint64 indexed sequenceNumber, bytes32 indexed messageId, bytes32 messageHash, MessageExecutionState state, bytes returnData, uint256 gasUsed);
    event SkippedAlreadyExecutedMessage(uint64 sourceChainSelector, uint64 sequenceNumber);

    error OnlyOwner();
    error OnlyTransmitter();
    error OnlyOffRamp();
    error SourceChainNotEnabled(uint64 sourceChainSelector);
    error InvalidMessageDestChainSelector(uint64 destChainSelector);
    error ReceiverError(bytes err);
    error UnsupportedToken(address token);

    constructor(uint64 chainSelector_) {
        chainSelector = chainSelector_;
        owner = msg.sender;
    }

    function typeAndVersion() external pure returns (string memory) {
        return "OffRamp 1.6.0";
    }

    function setTransmitter(address transmitter_) external {
        if (msg.sender != owner) revert OnlyOwner();
        transmitter = transmitter_;
    }

    function setSource(uint64 sourceChainSelector, bytes calldata onRamp) external {
        if (msg.sender != owner) revert OnlyOwner();
        sourceOnRamp[sourceChainSelector] = onRamp;
    }

    function setPool(address token, address pool) external {
        if (msg.sender != owner) revert OnlyOwner();
        poolOfToken[token] = pool;
    }

    function getExecutionState(uint64 sourceChainSelector, uint64 sequenceNumber) external view returns (MessageExecutionState) {
        return s_executionStates[sourceChainSelector][sequenceNumber];
    }

    function execute(Any2EVMRampMessage calldata message) external {
        if (msg.sender != transmitter) revert OnlyTransmitter();
        uint64 src = message.header.sourceChainSelector;
        if (sourceOnRamp[src].length == 0) revert SourceChainNotEnabled(src);
        if (message.header.destChainSelector != chainSelector) revert InvalidMessageDestChainSelector(message.header.destChainSelector);
        uint64 seq = message.header.sequenceNumber;
        if (s_executionStates[src][seq] != MessageExecutionState.UNTOUCHED) {
            emit SkippedAlreadyExecutedMessage(src, seq);
            return;
        }
        s_executionStates[src][seq] = MessageExecutionState.IN_PROGRESS;
        uint256 gasStart = gasleft();
        MessageExecutionState state = MessageExecutionState.SUCCESS;
        bytes memory returnData = "";
        try this.executeSingleMessage(message) {} catch (bytes memory err) {
            state = MessageExecutionState.FAILURE;
            returnData = err;
        }
        s_executionStates[src][seq] = state;
        executionStateOf[message.header.messageId] = state;
        emit ExecutionStateChanged(src, seq, message.header.messageId, keccak256(abi.encode(message)), state, returnData, gasStart - gasleft());
    }

    /// Tokens released and the receiver called in one call: a revert in either undoes both.
    function executeSingleMessage(Any2EVMRampMessage calldata message) external {
        if (msg.sender != address(this)) revert OnlyOffRamp();
        EVMTokenAmount[] memory amounts = new EVMTokenAmount[](message.tokenAmounts.length);
        for (uint256 i = 0; i < message.tokenAmounts.length; ++i) {
            address pool = poolOfToken[message.tokenAmounts[i].destTokenAddress];
            if (pool == address(0)) revert UnsupportedToken(message.tokenAmounts[i].destTokenAddress);
            TestCcipTokenPool(pool).releaseOrMint(message.receiver, message.tokenAmounts[i].amount);
            amounts[i] = EVMTokenAmount(message.tokenAmounts[i].destTokenAddress, message.tokenAmounts[i].amount);
        }
        if (message.receiver.code.length == 0 || (message.data.length == 0 && message.gasLimit == 0)) return;
        try IERC165(message.receiver).supportsInterface(CCIP_RECEIVE_INTERFACE) returns (bool yes) {
            if (!yes) return;
        } catch {
            return;
        }
        Any2EVMMessage memory m = Any2EVMMessage(message.header.messageId, message.header.sourceChainSelector, message.sender, message.data, amounts);
        try IAny2EVMMessageReceiver(message.receiver).ccipReceive{gas: message.gasLimit}(m) {} catch (bytes memory err) {
            revert ReceiverError(err);
        }
    }
}

/// A receiver contract that takes every message, and one that refuses every message (its tokens are not delivered).
contract TestCcipReceiver {
    bool public immutable refuses;
    uint256 public received;

    error Refused(bytes32 messageId);

    constructor(bool refuses_) {
        refuses = refuses_;
    }

    function supportsInterface(bytes4 interfaceId) external pure returns (bool) {
        return interfaceId == 0x85572ffb || interfaceId == 0x01ffc9a7;
    }

    function ccipReceive(Any2EVMMessage calldata message) external {
        if (refuses) revert Refused(message.messageId);
        received += 1;
    }
}
