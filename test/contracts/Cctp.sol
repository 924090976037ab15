// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// Test versions of Circle's CCTP v2 contracts, with the same ABI and events as TokenMessengerV2
/// and MessageTransmitterV2 for what Ferry uses: depositForBurn emitting DepositForBurn, sendMessage
/// emitting MessageSent(bytes) in the v2 message layout, receiveMessage checking the attesters'
/// ECDSA signatures over keccak256(message), the destination domain, the destination caller and
/// the nonce (usedNonces), then minting through the TokenMessenger. One contract pair per chain;
/// the TokenMinter's role is folded into the TokenMessenger. Fees follow Circle's TokenMessengerV2
/// (src/v2/TokenMessengerV2.sol, BaseTokenMessenger.sol): a minimum fee `minFee` in 1/1000 bps
/// (MIN_FEE_MULTIPLIER 10_000_000) set by the min fee controller, getMinFeeAmount, "Insufficient
/// max fee" at depositForBurn, and at the mint the attested feeExecuted (<= maxFee, < amount)
/// minted to `feeRecipient`, the rest to the recipient. Hooks are not implemented.

interface ICctpTestToken {
    function transferFrom(address from, address to, uint256 value) external returns (bool);
    function burn(uint256 value) external;
    function mint(address to, uint256 value) external;
}

interface IMessageHandlerV2 {
    function handleReceiveFinalizedMessage(uint32 remoteDomain, bytes32 sender, uint32 finalityThresholdExecuted, bytes calldata messageBody) external returns (bool);
    function handleReceiveUnfinalizedMessage(uint32 remoteDomain, bytes32 sender, uint32 finalityThresholdExecuted, bytes calldata messageBody) external returns (bool);
}

contract MessageTransmitterV2 {
    uint32 public immutable localDomain;
    uint32 public constant version = 1;
    uint256 public signatureThreshold = 1;
    address public owner;
    mapping(address => bool) internal enabledAttesters;
    mapping(bytes32 => uint256) public usedNonces;

    // secp256k1n / 2: signatures with a higher s are malleable and refused (as OpenZeppelin ECDSA).
    uint256 internal constant HALF_N = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    event MessageSent(bytes message);
    event MessageReceived(address indexed caller, uint32 sourceDomain, bytes32 indexed nonce, bytes32 sender, uint32 indexed finalityThresholdExecuted, bytes messageBody);
    event AttesterEnabled(address indexed attester);
    event AttesterDisabled(address indexed attester);

    constructor(uint32 localDomain_, address attester) {
        localDomain = localDomain_;
        owner = msg.sender;
        enabledAttesters[attester] = true;
        // As Circle's initialize(): nonce 0 is never valid, so a raw (unattested) log cannot be relayed.
        usedNonces[bytes32(0)] = 1;
        emit AttesterEnabled(attester);
    }

    function isEnabledAttester(address attester) public view returns (bool) {
        return enabledAttesters[attester];
    }

    function enableAttester(address attester) external {
        require(msg.sender == owner, "only owner");
        enabledAttesters[attester] = true;
        emit AttesterEnabled(attester);
    }

    function disableAttester(address attester) external {
        require(msg.sender == owner, "only owner");
        enabledAttesters[attester] = false;
        emit AttesterDisabled(attester);
    }

    function sendMessage(uint32 destinationDomain, bytes32 recipient, bytes32 destinationCaller, uint32 minFinalityThreshold, bytes calldata messageBody) external {
        require(destinationDomain != localDomain, "Domain is local domain");
        require(recipient != bytes32(0), "Recipient must be nonzero");
        // nonce and finalityThresholdExecuted are 0 here: the attester fills them in.
        bytes memory message = abi.encodePacked(
            version,
            localDomain,
            destinationDomain,
            bytes32(0),
            bytes32(uint256(uint160(msg.sender))),
            recipient,
            destinationCaller,
            minFinalityThreshold,
            uint32(0),
            messageBody
        );
        emit MessageSent(message);
    }

    function receiveMessage(bytes calldata message, bytes calldata attestation) external returns (bool) {
        _verifyAttestationSignatures(message, attestation);
        require(message.length >= 148, "Invalid message: too short");
        require(uint32(bytes4(message[8:12])) == localDomain, "Invalid destination domain");
        bytes32 destinationCaller = bytes32(message[108:140]);
        require(destinationCaller == bytes32(0) || destinationCaller == bytes32(uint256(uint160(msg.sender))), "Invalid caller for message");
        require(uint32(bytes4(message[0:4])) == version, "Invalid message version");
        bytes32 nonce = bytes32(message[12:44]);
        require(usedNonces[nonce] == 0, "Nonce already used");
        usedNonces[nonce] = 1;

        uint32 sourceDomain = uint32(bytes4(message[4:8]));
        bytes32 sender = bytes32(message[44:76]);
        address recipient = address(uint160(uint256(bytes32(message[76:108]))));
        uint32 finalityThresholdExecuted = uint32(bytes4(message[144:148]));
        bytes calldata body = message[148:];
        if (finalityThresholdExecuted >= 2000) {
            require(IMessageHandlerV2(recipient).handleReceiveFinalizedMessage(sourceDomain, sender, finalityThresholdExecuted, body), "handleReceiveFinalizedMessage() failed");
        } else {
            require(IMessageHandlerV2(recipient).handleReceiveUnfinalizedMessage(sourceDomain, sender, finalityThresholdExecuted, body), "handleReceiveUnfinalizedMessage() failed");
        }
        emit MessageReceived(msg.sender, sourceDomain, nonce, sender, finalityThresholdExecuted, body);
        return true;
    }

    function _verifyAttestationSignatures(bytes calldata message, bytes calldata attestation) internal view {
        require(attestation.length == 65 * signatureThreshold, "Invalid attestation length");
        bytes32 digest = keccak256(message);
        address latest = address(0);
        for (uint256 i = 0; i < signatureThreshold; i++) {
            bytes calldata sig = attestation[i * 65:(i + 1) * 65];
            bytes32 r = bytes32(sig[0:32]);
            bytes32 s = bytes32(sig[32:64]);
            uint8 v = uint8(sig[64]);
            require(uint256(s) <= HALF_N, "ECDSA: invalid signature 's' value");
            require(v == 27 || v == 28, "ECDSA: invalid signature 'v' value");
            address signer = ecrecover(digest, v, r, s);
            require(signer != address(0), "ECDSA: invalid signature");
            require(signer > latest, "Invalid signature order or dupe");
            require(enabledAttesters[signer], "Invalid signature: not attester");
            latest = signer;
        }
    }
}

contract TokenMessengerV2 is IMessageHandlerV2 {
    MessageTransmitterV2 public immutable localMessageTransmitter;
    uint32 public constant messageBodyVersion = 1;
    /// The lowest finality TokenMessengerV2 accepts (FinalityThresholds.sol).
    uint32 internal constant TOKEN_MESSENGER_MIN_FINALITY_THRESHOLD = 500;
    /// minFee is in 1/1000 basis points: the fee fraction is minFee / MIN_FEE_MULTIPLIER.
    uint256 public constant MIN_FEE_MULTIPLIER = 10_000_000;
    address public owner;
    address public feeRecipient;
    address public minFeeController;
    uint256 public minFee;
    mapping(uint32 => bytes32) public remoteTokenMessengers;
    /// keccak256(remoteDomain, remoteToken) -> the local token minted for it.
    mapping(bytes32 => address) public remoteTokensToLocalTokens;

    event DepositForBurn(
        address indexed burnToken,
        uint256 amount,
        address indexed depositor,
        bytes32 mintRecipient,
        uint32 destinationDomain,
        bytes32 destinationTokenMessenger,
        bytes32 destinationCaller,
        uint256 maxFee,
        uint32 indexed minFinalityThreshold,
        bytes hookData
    );
    event MintAndWithdraw(address indexed mintRecipient, uint256 amount, address indexed mintToken, uint256 feeCollected);
    event FeeRecipientSet(address feeRecipient);
    event MinFeeControllerSet(address minFeeController);
    event MinFeeSet(uint256 minFee);

    /// Circle's initialize() takes the roles and minFee_; here the deployer holds every role and minFee starts at 0.
    constructor(MessageTransmitterV2 transmitter) {
        localMessageTransmitter = transmitter;
        owner = msg.sender;
        _setFeeRecipient(msg.sender);
        _setMinFeeController(msg.sender);
        _setMinFee(0);
    }

    function setFeeRecipient(address _feeRecipient) external {
        require(msg.sender == owner, "Ownable: caller is not the owner");
        _setFeeRecipient(_feeRecipient);
    }

    function setMinFeeController(address _minFeeController) external {
        require(msg.sender == owner, "Ownable: caller is not the owner");
        _setMinFeeController(_minFeeController);
    }

    function setMinFee(uint256 _minFee) external {
        require(msg.sender == minFeeController, "Caller is not the min fee controller");
        _setMinFee(_minFee);
    }

    /// The minimum fee of a burn of `amount`: 0 without a minFee, else _calcMinFeeAmount (amount must exceed 1).
    function getMinFeeAmount(uint256 amount) external view returns (uint256) {
        if (minFee == 0) return 0;
        require(amount > 1, "Amount too low");
        return _calcMinFeeAmount(amount);
    }

    /// floor(amount * minFee / MIN_FEE_MULTIPLIER), at least 1. Assumes minFee > 0.
    function _calcMinFeeAmount(uint256 _amount) internal view returns (uint256) {
        uint256 _minFeeAmount = (_amount * minFee) / MIN_FEE_MULTIPLIER;
        return _minFeeAmount == 0 ? 1 : _minFeeAmount;
    }

    function _setFeeRecipient(address _feeRecipient) internal {
        require(_feeRecipient != address(0), "Zero address not allowed");
        feeRecipient = _feeRecipient;
        emit FeeRecipientSet(_feeRecipient);
    }

    function _setMinFeeController(address _minFeeController) internal {
        require(_minFeeController != address(0), "Zero address not allowed");
        minFeeController = _minFeeController;
        emit MinFeeControllerSet(_minFeeController);
    }

    function _setMinFee(uint256 _minFee) internal {
        require(_minFee < MIN_FEE_MULTIPLIER, "Min fee too high");
        minFee = _minFee;
        emit MinFeeSet(_minFee);
    }

    function addRemoteTokenMessenger(uint32 domain, bytes32 tokenMessenger) external {
        require(msg.sender == owner, "only owner");
        remoteTokenMessengers[domain] = tokenMessenger;
    }

    function linkTokenPair(address localToken, uint32 remoteDomain, bytes32 remoteToken) external {
        require(msg.sender == owner, "only owner");
        remoteTokensToLocalTokens[keccak256(abi.encodePacked(remoteDomain, remoteToken))] = localToken;
    }

    function depositForBurn(
        uint256 amount,
        uint32 destinationDomain,
        bytes32 mintRecipient,
        address burnToken,
        bytes32 destinationCaller,
        uint256 maxFee,
        uint32 minFinalityThreshold
    ) external {
        require(amount > 0, "Amount must be nonzero");
        require(mintRecipient != bytes32(0), "Mint recipient must be nonzero");
        require(maxFee < amount, "Max fee must be less than amount");
        if (minFee > 0) {
            // Implicitly constrains amount to be greater than 1: 0 < minFeeAmount <= maxFee < amount.
            require(maxFee >= _calcMinFeeAmount(amount), "Insufficient max fee");
        }
        bytes32 destinationTokenMessenger = remoteTokenMessengers[destinationDomain];
        require(destinationTokenMessenger != bytes32(0), "No TokenMessenger for domain");
        require(ICctpTestToken(burnToken).transferFrom(msg.sender, address(this), amount), "Transfer operation failed");
        ICctpTestToken(burnToken).burn(amount);
        bytes memory body = abi.encodePacked(
            messageBodyVersion,
            bytes32(uint256(uint160(burnToken))),
            mintRecipient,
            amount,
            bytes32(uint256(uint160(msg.sender))),
            maxFee,
            uint256(0),
            uint256(0)
        );
        localMessageTransmitter.sendMessage(destinationDomain, destinationTokenMessenger, destinationCaller, minFinalityThreshold, body);
        emit DepositForBurn(burnToken, amount, msg.sender, mintRecipient, destinationDomain, destinationTokenMessenger, destinationCaller, maxFee, minFinalityThreshold, "");
    }

    function handleReceiveFinalizedMessage(uint32 remoteDomain, bytes32 sender, uint32, bytes calldata messageBody) external returns (bool) {
        return _mint(remoteDomain, sender, messageBody);
    }

    function handleReceiveUnfinalizedMessage(uint32 remoteDomain, bytes32 sender, uint32 finalityThresholdExecuted, bytes calldata messageBody) external returns (bool) {
        require(finalityThresholdExecuted >= TOKEN_MESSENGER_MIN_FINALITY_THRESHOLD, "Unsupported finality threshold");
        return _mint(remoteDomain, sender, messageBody);
    }

    function _mint(uint32 remoteDomain, bytes32 sender, bytes calldata body) internal returns (bool) {
        require(msg.sender == address(localMessageTransmitter), "Invalid message transmitter");
        require(sender != bytes32(0) && remoteTokenMessengers[remoteDomain] == sender, "Remote TokenMessenger unsupported");
        require(body.length >= 228, "Invalid burn message");
        require(uint32(bytes4(body[0:4])) == messageBodyVersion, "Invalid message body version");
        bytes32 burnToken = bytes32(body[4:36]);
        address mintRecipient = address(uint160(uint256(bytes32(body[36:68]))));
        uint256 amount = uint256(bytes32(body[68:100]));
        uint256 maxFee = uint256(bytes32(body[132:164]));
        uint256 feeExecuted = uint256(bytes32(body[164:196]));
        uint256 expirationBlock = uint256(bytes32(body[196:228]));
        require(expirationBlock == 0 || expirationBlock > block.number, "Message expired and must be re-signed");
        require(feeExecuted == 0 || feeExecuted < amount, "Fee equals or exceeds amount");
        require(feeExecuted <= maxFee, "Fee exceeds max fee");
        address localToken = remoteTokensToLocalTokens[keccak256(abi.encodePacked(remoteDomain, burnToken))];
        require(localToken != address(0), "Mint token not supported");
        // The fee is taken at the mint: amount - fee to the recipient, the fee to feeRecipient.
        ICctpTestToken(localToken).mint(mintRecipient, amount - feeExecuted);
        if (feeExecuted > 0) ICctpTestToken(localToken).mint(feeRecipient, feeExecuted);
        emit MintAndWithdraw(mintRecipient, amount - feeExecuted, localToken, feeExecuted);
        return true;
    }
}
