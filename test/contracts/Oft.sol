// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// LayerZero OFT v2 test contracts, written after the public behaviour of LayerZero-v2's EndpointV2,
/// OAppSender and OFTCore (docs/usdt0-lane.md lists the rules and where each comes from):
/// - the GUID is keccak256(packed(nonce, srcEid, sender, dstEid, receiver)); the outbound nonce counts
///   per (sender, dstEid, receiver);
/// - PacketSent carries the PacketV1 encoding (version 1, nonce, srcEid, sender, dstEid, receiver, guid, message);
/// - the endpoint reverts LZ_InsufficientFee when msg.value is below the fee, and refunds the excess to
///   the refund address; the OApp itself wants msg.value == fee.nativeFee exactly (NotEnoughNative);
/// - OFT: dust removal to 6 shared decimals, SlippageExceeded when what is received is below
///   minAmountLD, NoPeer for an eid with no peer, the caller's options type 3 when combined with enforced
///   options (OAppOptionsType3), the message is to ‖ uint64 amountSD;
/// - on the destination only the endpoint may call lzReceive, and only from the peer of the source eid.
/// What is emulated, not copied: verification (DVNs, the receive library) is one trusted relayer
/// (test/emulators/lz-relayer.ts), which the destination endpoint alone lets deliver a packet, once.

struct SendParam {
    uint32 dstEid;
    bytes32 to;
    uint256 amountLD;
    uint256 minAmountLD;
    bytes extraOptions;
    bytes composeMsg;
    bytes oftCmd;
}

struct MessagingFee {
    uint256 nativeFee;
    uint256 lzTokenFee;
}

struct MessagingReceipt {
    bytes32 guid;
    uint64 nonce;
    MessagingFee fee;
}

struct OFTReceipt {
    uint256 amountSentLD;
    uint256 amountReceivedLD;
}

struct OFTLimit {
    uint256 minAmountLD;
    uint256 maxAmountLD;
}

struct OFTFeeDetail {
    int256 feeAmountLD;
    string description;
}

struct Origin {
    uint32 srcEid;
    bytes32 sender;
    uint64 nonce;
}

struct MessagingParams {
    uint32 dstEid;
    bytes32 receiver;
    bytes message;
    bytes options;
    bool payInLzToken;
}

interface ILzReceiver {
    function lzReceive(Origin calldata origin, bytes32 guid, bytes calldata message, address executor, bytes calldata extraData) external payable;
}

interface IOftToken {
    function decimals() external view returns (uint8);
    function transfer(address to, uint256 value) external returns (bool);
    function transferFrom(address from, address to, uint256 value) external returns (bool);
    function mint(address to, uint256 value) external;
    function burn(uint256 value) external;
}

/// An EndpointV2 as an OApp sees it: quote, send (fees, nonces, GUID, PacketSent) and, on the
/// destination, lzReceive by the relayer standing for the verifiers and the executor.
contract TestEndpointV2 {
    uint32 public immutable eid;
    address public immutable owner;
    /// The emulated relayer: the only account whose lzReceive this endpoint executes.
    address public relayer;
    /// The native fee of one packet: base + perByte * (message + options length).
    uint256 public baseFee;
    uint256 public feePerByte;
    /// No lz token in the test world: paying in it is refused as the endpoint does without one.
    address public lzToken;
    uint256 public feesCollected;

    mapping(address => mapping(uint32 => mapping(bytes32 => uint64))) public outboundNonce;
    /// receiver -> srcEid -> sender -> nonce -> executed.
    mapping(address => mapping(uint32 => mapping(bytes32 => mapping(uint64 => bool)))) public executed;

    event PacketSent(bytes encodedPayload, bytes options, address sendLibrary);
    event PacketDelivered(Origin origin, address receiver);

    error LZ_InsufficientFee(uint256 requiredNative, uint256 suppliedNative, uint256 requiredLzToken, uint256 suppliedLzToken);
    error LZ_LzTokenUnavailable();
    error LZ_Unauthorized();
    error LZ_InvalidGuid(bytes32 expected, bytes32 actual);
    error LZ_PayloadHashNotFound(bytes32 expected, bytes32 actual);

    constructor(uint32 eid_, uint256 baseFee_, uint256 feePerByte_) {
        eid = eid_;
        owner = msg.sender;
        baseFee = baseFee_;
        feePerByte = feePerByte_;
    }

    function setRelayer(address relayer_) external {
        if (msg.sender != owner) revert LZ_Unauthorized();
        relayer = relayer_;
    }

    function setFee(uint256 baseFee_, uint256 feePerByte_) external {
        if (msg.sender != owner) revert LZ_Unauthorized();
        baseFee = baseFee_;
        feePerByte = feePerByte_;
    }

    function _fee(MessagingParams calldata p) internal view returns (uint256) {
        return baseFee + feePerByte * (p.message.length + p.options.length);
    }

    function quote(MessagingParams calldata p, address) external view returns (MessagingFee memory) {
        if (p.payInLzToken && lzToken == address(0)) revert LZ_LzTokenUnavailable();
        return MessagingFee(_fee(p), 0);
    }

    function send(MessagingParams calldata p, address refundAddress) external payable returns (MessagingReceipt memory) {
        if (p.payInLzToken && lzToken == address(0)) revert LZ_LzTokenUnavailable();
        uint64 nonce = ++outboundNonce[msg.sender][p.dstEid][p.receiver];
        bytes32 sender = bytes32(uint256(uint160(msg.sender)));
        bytes32 guid = keccak256(abi.encodePacked(nonce, eid, sender, p.dstEid, p.receiver));
        emit PacketSent(abi.encodePacked(uint8(1), nonce, eid, sender, p.dstEid, p.receiver, guid, p.message), p.options, address(this));
        uint256 fee = _fee(p);
        if (fee > msg.value) revert LZ_InsufficientFee(fee, msg.value, 0, 0);
        feesCollected += fee;
        if (msg.value > fee) {
            (bool ok, ) = refundAddress.call{value: msg.value - fee}("");
            require(ok, "refund failed");
        }
        return MessagingReceipt(guid, nonce, MessagingFee(fee, 0));
    }

    /// Verification and execution in one step, by the relayer only; a packet executes once.
    function lzReceive(Origin calldata origin, address receiver, bytes32 guid, bytes calldata message, bytes calldata extraData) external payable {
        if (msg.sender != relayer) revert LZ_Unauthorized();
        bytes32 expected = keccak256(abi.encodePacked(origin.nonce, origin.srcEid, origin.sender, eid, bytes32(uint256(uint160(receiver)))));
        if (guid != expected) revert LZ_InvalidGuid(expected, guid);
        if (executed[receiver][origin.srcEid][origin.sender][origin.nonce]) revert LZ_PayloadHashNotFound(keccak256(abi.encodePacked(guid, message)), bytes32(0));
        executed[receiver][origin.srcEid][origin.sender][origin.nonce] = true;
        ILzReceiver(receiver).lzReceive{value: msg.value}(origin, guid, message, msg.sender, extraData);
        emit PacketDelivered(origin, receiver);
    }
}

/// An OFT over an existing token: locks and unlocks it (an OFTAdapter, as USDT0 on Ethereum), or
/// with `burnMint` burns and mints it (as USDT0 elsewhere, through the token's mint and burn).
/// Either way the sender approves this contract (approvalRequired).
contract TestOFT {
    uint8 public constant SHARED_DECIMALS = 6;
    uint16 internal constant SEND = 1;
    uint16 internal constant SEND_AND_CALL = 2;

    IOftToken internal immutable innerToken;
    TestEndpointV2 public immutable endpoint;
    uint256 public immutable decimalConversionRate;
    bool public immutable burnMint;
    address public immutable owner;
    mapping(uint32 => bytes32) public peers;
    mapping(uint32 => mapping(uint16 => bytes)) public enforcedOptions;

    event PeerSet(uint32 eid, bytes32 peer);
    event OFTSent(bytes32 indexed guid, uint32 dstEid, address indexed fromAddress, uint256 amountSentLD, uint256 amountReceivedLD);
    event OFTReceived(bytes32 indexed guid, uint32 srcEid, address indexed toAddress, uint256 amountReceivedLD);

    error InvalidLocalDecimals();
    error SlippageExceeded(uint256 amountLD, uint256 minAmountLD);
    error NotEnoughNative(uint256 msgValue);
    error LzTokenUnavailable();
    error NoPeer(uint32 eid);
    error OnlyEndpoint(address addr);
    error OnlyPeer(uint32 eid, bytes32 sender);
    error InvalidOptions(bytes options);
    error Unauthorized();

    constructor(address token_, address endpoint_, bool burnMint_) {
        uint8 local = IOftToken(token_).decimals();
        if (local < SHARED_DECIMALS) revert InvalidLocalDecimals();
        innerToken = IOftToken(token_);
        endpoint = TestEndpointV2(endpoint_);
        decimalConversionRate = 10 ** (local - SHARED_DECIMALS);
        burnMint = burnMint_;
        owner = msg.sender;
    }

    function token() external view returns (address) {
        return address(innerToken);
    }

    function approvalRequired() external pure returns (bool) {
        return true;
    }

    function sharedDecimals() external pure returns (uint8) {
        return SHARED_DECIMALS;
    }

    function oftVersion() external pure returns (bytes4 interfaceId, uint64 version) {
        return (bytes4(0x02e49c2c), 1);
    }

    function setPeer(uint32 eid, bytes32 peer) external {
        if (msg.sender != owner) revert Unauthorized();
        peers[eid] = peer;
        emit PeerSet(eid, peer);
    }

    function setEnforcedOptions(uint32 eid, uint16 msgType, bytes calldata options) external {
        if (msg.sender != owner) revert Unauthorized();
        _assertOptionsType3(options);
        enforcedOptions[eid][msgType] = options;
    }

    // --- sending

    function quoteOFT(SendParam calldata sp) external view returns (OFTLimit memory limit, OFTFeeDetail[] memory details, OFTReceipt memory receipt) {
        limit = OFTLimit(0, type(uint64).max * decimalConversionRate);
        details = new OFTFeeDetail[](0);
        (uint256 sent, uint256 received) = _debitView(sp.amountLD, sp.minAmountLD);
        receipt = OFTReceipt(sent, received);
    }

    function quoteSend(SendParam calldata sp, bool payInLzToken) external view returns (MessagingFee memory) {
        (, uint256 received) = _debitView(sp.amountLD, sp.minAmountLD);
        (bytes memory message, bytes memory options) = _buildMsgAndOptions(sp, received);
        return endpoint.quote(MessagingParams(sp.dstEid, _getPeerOrRevert(sp.dstEid), message, options, payInLzToken), address(this));
    }

    function send(SendParam calldata sp, MessagingFee calldata fee, address refundAddress)
        external
        payable
        returns (MessagingReceipt memory msgReceipt, OFTReceipt memory oftReceipt)
    {
        (uint256 sent, uint256 received) = _debit(msg.sender, sp.amountLD, sp.minAmountLD);
        (bytes memory message, bytes memory options) = _buildMsgAndOptions(sp, received);
        // OAppSender._lzSend: the native fee exactly, the lz token fee pulled (there is none here).
        if (msg.value != fee.nativeFee) revert NotEnoughNative(msg.value);
        if (fee.lzTokenFee > 0) revert LzTokenUnavailable();
        msgReceipt = endpoint.send{value: fee.nativeFee}(MessagingParams(sp.dstEid, _getPeerOrRevert(sp.dstEid), message, options, false), refundAddress);
        oftReceipt = OFTReceipt(sent, received);
        emit OFTSent(msgReceipt.guid, sp.dstEid, msg.sender, sent, received);
    }

    function _removeDust(uint256 amountLD) internal view returns (uint256) {
        return (amountLD / decimalConversionRate) * decimalConversionRate;
    }

    function _debitView(uint256 amountLD, uint256 minAmountLD) internal view returns (uint256 sent, uint256 received) {
        sent = _removeDust(amountLD);
        received = sent;
        if (received < minAmountLD) revert SlippageExceeded(received, minAmountLD);
    }

    function _debit(address from, uint256 amountLD, uint256 minAmountLD) internal returns (uint256 sent, uint256 received) {
        (sent, received) = _debitView(amountLD, minAmountLD);
        require(innerToken.transferFrom(from, address(this), sent), "transferFrom failed");
        if (burnMint) innerToken.burn(sent);
    }

    function _buildMsgAndOptions(SendParam calldata sp, uint256 amountLD) internal view returns (bytes memory message, bytes memory options) {
        bool composed = sp.composeMsg.length > 0;
        uint64 amountSD = uint64(amountLD / decimalConversionRate);
        message = composed
            ? abi.encodePacked(sp.to, amountSD, bytes32(uint256(uint160(msg.sender))), sp.composeMsg)
            : abi.encodePacked(sp.to, amountSD);
        options = _combineOptions(sp.dstEid, composed ? SEND_AND_CALL : SEND, sp.extraOptions);
    }

    function _combineOptions(uint32 eid, uint16 msgType, bytes calldata extra) internal view returns (bytes memory) {
        bytes memory enforced = enforcedOptions[eid][msgType];
        if (enforced.length == 0) return extra;
        if (extra.length == 0) return enforced;
        _assertOptionsType3(extra);
        return bytes.concat(enforced, extra[2:]);
    }

    function _assertOptionsType3(bytes calldata options) internal pure {
        if (options.length < 2 || uint16(bytes2(options[0:2])) != 3) revert InvalidOptions(options);
    }

    function _getPeerOrRevert(uint32 eid) internal view returns (bytes32 peer) {
        peer = peers[eid];
        if (peer == bytes32(0)) revert NoPeer(eid);
    }

    // --- receiving

    function allowInitializePath(Origin calldata origin) external view returns (bool) {
        return peers[origin.srcEid] == origin.sender;
    }

    function lzReceive(Origin calldata origin, bytes32 guid, bytes calldata message, address, bytes calldata) external payable {
        if (msg.sender != address(endpoint)) revert OnlyEndpoint(msg.sender);
        if (peers[origin.srcEid] != origin.sender || origin.sender == bytes32(0)) revert OnlyPeer(origin.srcEid, origin.sender);
        address to = address(uint160(uint256(bytes32(message[0:32]))));
        uint256 amountLD = uint256(uint64(bytes8(message[32:40]))) * decimalConversionRate;
        if (to == address(0)) to = address(0xdead);
        if (burnMint) innerToken.mint(to, amountLD);
        else require(innerToken.transfer(to, amountLD), "transfer failed");
        emit OFTReceived(guid, origin.srcEid, to, amountLD);
    }
}
